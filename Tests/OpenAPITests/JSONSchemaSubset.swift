/// A JSON value, members in their order, numbers with whether they were written as integers.
indirect enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double, integer: Bool)
    case string(String)
    case array([JSON])
    case object([(key: String, value: JSON)])

    static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x, _), .number(let y, _)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    var members: [(key: String, value: JSON)] {
        if case .object(let m) = self { return m }
        return []
    }

    var items: [JSON] {
        if case .array(let a) = self { return a }
        return []
    }

    /// The JSON Schema type names this value has (an integer is a number too).
    var types: [String] {
        switch self {
        case .null: ["null"]
        case .bool: ["boolean"]
        case .number(let d, let integer): integer || d == d.rounded() ? ["integer", "number"] : ["number"]
        case .string: ["string"]
        case .array: ["array"]
        case .object: ["object"]
        }
    }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    /// Reads one JSON text (RFC 8259), nothing after it but white space.
    static func parse(_ text: String) throws -> JSON {
        var parser = Parser(bytes: Array(text.utf8))
        let value = try parser.value()
        parser.space()
        guard parser.i == parser.bytes.count else { throw parser.error("text after the value") }
        return value
    }

    struct Parser {
        let bytes: [UInt8]
        var i = 0

        func error(_ what: String) -> ParseError { ParseError(description: "\(what) at byte \(i)") }

        mutating func space() {
            while i < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[i]) { i += 1 }
        }

        mutating func literal(_ word: String, _ value: JSON) throws -> JSON {
            let w = Array(word.utf8)
            guard bytes.count - i >= w.count, Array(bytes[i..<i + w.count]) == w else { throw error("not \(word)") }
            i += w.count
            return value
        }

        mutating func value() throws -> JSON {
            space()
            guard i < bytes.count else { throw error("the end of the text") }
            switch bytes[i] {
            case UInt8(ascii: "{"):
                i += 1
                var members: [(key: String, value: JSON)] = []
                space()
                if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
                    i += 1
                    return .object([])
                }
                while true {
                    space()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("a key expected") }
                    let key = try string()
                    space()
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("':' expected") }
                    i += 1
                    members.append((key, try value()))
                    space()
                    guard i < bytes.count else { throw error("the end of the text") }
                    if bytes[i] == UInt8(ascii: ",") {
                        i += 1
                        continue
                    }
                    guard bytes[i] == UInt8(ascii: "}") else { throw error("',' or '}' expected") }
                    i += 1
                    return .object(members)
                }
            case UInt8(ascii: "["):
                i += 1
                var items: [JSON] = []
                space()
                if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
                    i += 1
                    return .array([])
                }
                while true {
                    items.append(try value())
                    space()
                    guard i < bytes.count else { throw error("the end of the text") }
                    if bytes[i] == UInt8(ascii: ",") {
                        i += 1
                        continue
                    }
                    guard bytes[i] == UInt8(ascii: "]") else { throw error("',' or ']' expected") }
                    i += 1
                    return .array(items)
                }
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            default: return try number()
            }
        }

        mutating func number() throws -> JSON {
            let start = i
            while i < bytes.count, "+-0123456789.eE".utf8.contains(bytes[i]) { i += 1 }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            guard text.wholeMatch(of: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/) != nil, let d = Double(text)
            else { throw error("not a value: '\(text.prefix(20))'") }
            return .number(d, integer: !text.contains(where: { ".eE".contains($0) }))
        }

        mutating func string() throws -> String {
            i += 1
            var out: [UInt8] = []
            while i < bytes.count {
                let c = bytes[i]
                i += 1
                switch c {
                case UInt8(ascii: "\""):
                    guard let s = String(validating: out, as: UTF8.self) else { throw error("not UTF-8") }
                    return s
                case UInt8(ascii: "\\"):
                    guard i < bytes.count else { throw error("an escape cut short") }
                    let e = bytes[i]
                    i += 1
                    switch e {
                    case UInt8(ascii: "u"):
                        guard bytes.count - i >= 4,
                            var code = UInt32(
                                String(decoding: bytes[i..<i + 4], as: UTF8.self),
                                radix: 16)
                        else { throw error("a bad \\u escape") }
                        i += 4
                        if (0xD800..<0xDC00).contains(code), bytes.count - i >= 6, bytes[i] == UInt8(ascii: "\\"),
                            let low = UInt32(String(decoding: bytes[i + 2..<i + 6], as: UTF8.self), radix: 16)
                        {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                            i += 6
                        }
                        out += Array(String(Unicode.Scalar(code).map(Character.init) ?? "\u{FFFD}").utf8)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    default: throw error("a bad escape")
                    }
                case 0..<0x20: throw error("a control character in a string")
                default: out.append(c)
                }
            }
            throw error("a string cut short")
        }
    }
}

/// The subset of JSON Schema (2020-12, as OpenAPI 3.1 uses it) docs/openapi.yaml uses: `$ref` (into
/// the document), `type` (a name or a list: `[string, "null"]`), `const`, `enum`, `required`,
/// `properties`, `additionalProperties`, `items`, `minItems`, `maxItems`, `maxLength`, `minimum`,
/// `maximum`, `exclusiveMinimum`, `oneOf`, `anyOf`, `allOf`. Any other keyword is refused, so that
/// the document cannot say more than the test checks.
struct SchemaValidator {
    /// The whole document, for `$ref`.
    let document: JSON

    static let annotations: Set<String> = [
        "description", "format", "default", "title", "examples", "contentMediaType", "pattern",
    ]
    static let keywords: Set<String> = [
        "$ref", "type", "const", "enum", "required", "properties", "additionalProperties", "items", "minItems",
        "maxItems", "maxLength", "minimum", "maximum", "exclusiveMinimum", "oneOf", "anyOf", "allOf",
    ]

    /// The schema `$ref` points to (`#/components/schemas/Error`).
    func resolve(_ reference: String) -> JSON? {
        guard reference.hasPrefix("#/") else { return nil }
        var node: JSON? = document
        for part in reference.dropFirst(2).split(separator: "/") {
            node = node?[String(part).replacing("~1", with: "/").replacing("~0", with: "~")]
        }
        return node
    }

    /// What is wrong with `value` under `schema`, each problem with its JSON path (`$.devices[0].id`).
    func problems(_ value: JSON, _ schema: JSON, path: String = "$") -> [String] {
        var out: [String] = []
        for (keyword, _) in schema.members
        where !Self.keywords.contains(keyword) && !Self.annotations.contains(keyword) && !keyword.hasPrefix("x-") {
            out.append("\(path): the schema's keyword '\(keyword)' is not one the test checks")
        }
        if let reference = schema["$ref"]?.string {
            guard let target = resolve(reference) else { return out + ["\(path): no schema at '\(reference)'"] }
            out += problems(value, target, path: path)
        }
        if let type = schema["type"] {
            let allowed = type.string.map { [$0] } ?? type.items.compactMap(\.string)
            if !value.types.contains(where: allowed.contains) {
                return out + [
                    "\(path): \(value.types.first ?? "?") where the schema says \(allowed.joined(separator: " or "))"
                ]
            }
        }
        if let constant = schema["const"], constant != value {
            out.append("\(path): \(Self.short(value)) where the schema says \(Self.short(constant))")
        }
        if let choices = schema["enum"], !choices.items.contains(value) {
            out.append("\(path): \(Self.short(value)) is not one of \(choices.items.map(Self.short))")
        }
        if case .object(let members) = value {
            for name in schema["required"]?.items.compactMap(\.string) ?? []
            where !members.contains(where: { $0.key == name }) {
                out.append("\(path).\(name): missing (required)")
            }
            let properties = schema["properties"]
            for (key, member) in members {
                if let sub = properties?[key] {
                    out += problems(member, sub, path: "\(path).\(key)")
                } else if let extra = schema["additionalProperties"] {
                    if extra == .bool(false) {
                        out.append("\(path).\(key): not a property the schema allows")
                    } else if case .object = extra {
                        out += problems(member, extra, path: "\(path).\(key)")
                    }
                }
            }
        }
        if case .array(let items) = value {
            if let itemSchema = schema["items"] {
                for (i, item) in items.enumerated() { out += problems(item, itemSchema, path: "\(path)[\(i)]") }
            }
            if case .number(let n, _)? = schema["minItems"], Double(items.count) < n {
                out.append("\(path): \(items.count) items, fewer than \(Int(n))")
            }
            if case .number(let n, _)? = schema["maxItems"], Double(items.count) > n {
                out.append("\(path): \(items.count) items, more than \(Int(n))")
            }
        }
        if case .string(let s) = value, case .number(let n, _)? = schema["maxLength"], Double(s.count) > n {
            out.append("\(path): \(s.count) characters, more than \(Int(n))")
        }
        if case .number(let d, _) = value {
            if case .number(let n, _)? = schema["minimum"], d < n { out.append("\(path): \(d) is below \(n)") }
            if case .number(let n, _)? = schema["maximum"], d > n { out.append("\(path): \(d) is above \(n)") }
            if case .number(let n, _)? = schema["exclusiveMinimum"], d <= n {
                out.append("\(path): \(d) is not above \(n)")
            }
        }
        for sub in schema["allOf"]?.items ?? [] { out += problems(value, sub, path: path) }
        if let choices = schema["anyOf"]?.items, !choices.contains(where: { problems(value, $0, path: path).isEmpty }) {
            out.append("\(path): matches none of anyOf")
        }
        if let choices = schema["oneOf"]?.items {
            let matching = choices.filter { problems(value, $0, path: path).isEmpty }.count
            if matching != 1 { out.append("\(path): matches \(matching) of oneOf's schemas, not one") }
        }
        return out
    }

    static func short(_ value: JSON) -> String {
        switch value {
        case .null: "null"
        case .bool(let b): "\(b)"
        case .number(let d, let integer): integer ? "\(Int(d))" : "\(d)"
        case .string(let s): "'\(s.prefix(40))'"
        case .array(let a): "an array of \(a.count)"
        case .object: "an object"
        }
    }
}
