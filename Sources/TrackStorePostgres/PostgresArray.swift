import NIOCore
import PostgresNIO

/// A one-dimensional PostgreSQL array in the binary format, whose elements may be NULL (postgres-nio's
/// own arrays can't hold NULL): a batch's column, bound as one parameter and read back with `unnest`.
struct PostgresArray: PostgresNonThrowingEncodable {
    /// The element type's OID and how one element is written.
    enum Element {
        case text(String?)
        case float8(Double?)
        case int8(Int64?)
        case bool(Bool?)
        case bytea([UInt8]?)
    }

    let elementType: PostgresDataType
    let arrayType: PostgresDataType
    let elements: [Element]

    static var psqlType: PostgresDataType { .textArray }
    static var psqlFormat: PostgresFormat { .binary }
    var psqlType: PostgresDataType { arrayType }
    var psqlFormat: PostgresFormat { .binary }

    static func texts(_ values: [String?]) -> PostgresArray {
        PostgresArray(elementType: .text, arrayType: .textArray, elements: values.map { .text($0) })
    }

    static func doubles(_ values: [Double?]) -> PostgresArray {
        PostgresArray(elementType: .float8, arrayType: .float8Array, elements: values.map { .float8($0) })
    }

    static func integers(_ values: [Int64?]) -> PostgresArray {
        PostgresArray(elementType: .int8, arrayType: .int8Array, elements: values.map { .int8($0) })
    }

    static func bools(_ values: [Bool]) -> PostgresArray {
        PostgresArray(elementType: .bool, arrayType: .boolArray, elements: values.map { .bool($0) })
    }

    static func byteas(_ values: [[UInt8]?]) -> PostgresArray {
        PostgresArray(elementType: .bytea, arrayType: .byteaArray, elements: values.map { .bytea($0) })
    }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer,
        context: PostgresEncodingContext<JSONEncoder>
    ) {
        let hasNull = elements.contains { e in
            switch e {
            case .text(let v): v == nil
            case .float8(let v): v == nil
            case .int8(let v): v == nil
            case .bool(let v): v == nil
            case .bytea(let v): v == nil
            }
        }
        buffer.writeInteger(Int32(elements.isEmpty ? 0 : 1))
        buffer.writeInteger(Int32(hasNull ? 1 : 0))
        buffer.writeInteger(elementType.rawValue)
        guard !elements.isEmpty else { return }
        buffer.writeInteger(Int32(elements.count))
        buffer.writeInteger(Int32(1))
        for e in elements {
            switch e {
            case .text(let v?):
                buffer.writeInteger(Int32(v.utf8.count))
                buffer.writeString(v)
            case .float8(let v?):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(v.bitPattern)
            case .int8(let v?):
                buffer.writeInteger(Int32(8))
                buffer.writeInteger(v)
            case .bool(let v?):
                buffer.writeInteger(Int32(1))
                buffer.writeInteger(UInt8(v ? 1 : 0))
            case .bytea(let v?):
                buffer.writeInteger(Int32(v.count))
                buffer.writeBytes(v)
            default:
                buffer.writeInteger(Int32(-1))
            }
        }
    }
}
