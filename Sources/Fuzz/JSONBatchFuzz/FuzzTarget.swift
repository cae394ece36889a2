import Formats

/// A fixed "now" so that runs are reproducible (2024-05-14T12:00:00Z).
let now = 1_715_688_000.0

/// `JSONBatch.decode` on any bytes: never a crash, a rejection is a `WireFormatError`; a batch it
/// accepts survives the encoder: decode → encode → decode is accepted again, gives the same
/// device and records, and encodes to the same bytes (the first encoding rounds: times to the
/// millisecond, coordinates to nine decimals).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let first: (device: String, records: [TrailRecord])
    do throws(WireFormatError) {
        first = try JSONBatch.decode(bytes, now: now)
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        return 0
    }
    precondition(first.records.allSatisfy { $0.device == first.device }, "a record of another device")
    let encoded = JSONBatch.encode(device: first.device, records: first.records)
    let second: (device: String, records: [TrailRecord])
    do throws(WireFormatError) {
        second = try JSONBatch.decode(encoded, now: now)
    } catch {
        preconditionFailure("an accepted batch, encoded, is refused: \(error): \(String(decoding: encoded, as: UTF8.self))")
    }
    precondition(second.device == first.device, "the device changed in the round trip")
    precondition(second.records.count == first.records.count, "the record count changed in the round trip")
    let again = JSONBatch.encode(device: second.device, records: second.records)
    precondition(again == encoded, "encode(decode(encode(x))) != encode(x)")
    precondition(try! JSONBatch.decode(again, now: now).records == second.records, "decode is not stable")
    return 0
}
