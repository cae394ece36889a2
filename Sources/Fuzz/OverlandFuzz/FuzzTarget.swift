import Formats

/// A fixed "now" so that runs are reproducible (2024-05-14T12:00:00Z).
let now = 1_715_688_000.0

/// `Overland.decode` on any body: never a crash, a rejection is a `FormatsError` with a message;
/// what it accepts survives the encoder: decode → encode → decode gives as many records, at the
/// same times (to the millisecond) and devices, and encodes to the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let first: [TrailRecord]
    do throws(FormatsError) {
        first = try Overland.decode(bytes, device: "phone", now: now)
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        return 0
    }
    precondition(first.count <= Overland.maxLocations, "more locations than the limit")
    guard let device = first.first?.device, first.allSatisfy({ $0.device == device }) else { return 0 }
    let encoded = Overland.encode(device: device, records: first)
    let second: [TrailRecord]
    do throws(FormatsError) {
        second = try Overland.decode(encoded, device: "phone", now: now)
    } catch {
        preconditionFailure("accepted records, encoded, are refused: \(error)")
    }
    precondition(second.count == first.count, "the round trip changed the number of records")
    for (a, b) in zip(first, second) {
        precondition(a.device == b.device, "the round trip changed a device")
        precondition(abs(a.time - b.time) < 0.0015, "the round trip changed a time")
    }
    precondition(Overland.encode(device: device, records: second) == encoded, "encode(decode(encode(x))) != encode(x)")
    return 0
}
