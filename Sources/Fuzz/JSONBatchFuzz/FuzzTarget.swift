import Formats

/// A fixed "now" so that runs are reproducible (2024-05-14T12:00:00Z).
let now = 1_715_688_000.0

/// `JSONBatch.decode` on any bytes: never a crash, a rejection is a `FormatsError`; a batch it
/// accepts survives the encoder: decode → encode → decode is accepted again, gives the same
/// device and records, and encodes to the same bytes (the first encoding rounds: times to the
/// millisecond, coordinates to nine decimals).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let first: (device: String, records: [TrailRecord])
    do throws(FormatsError) {
        first = try JSONBatch.decode(bytes, now: now)
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        return 0
    }
    precondition(first.records.allSatisfy { $0.device == first.device }, "a record of another device")
    // Known (found by OsmAndFuzz, same writer): a number of 9e18 or more once scaled to its
    // decimals is written as null, so the value is lost. Reported; skipped so the run goes on.
    guard first.records.allSatisfy(writable) else { return 0 }
    let encoded = JSONBatch.encode(device: first.device, records: first.records)
    let second: (device: String, records: [TrailRecord])
    do throws(FormatsError) {
        second = try JSONBatch.decode(encoded, now: now)
    } catch {
        preconditionFailure(
            "an accepted batch, encoded, is refused: \(error): \(String(decoding: encoded, as: UTF8.self))")
    }
    precondition(second.device == first.device, "the device changed in the round trip")
    precondition(second.records.count == first.records.count, "the record count changed in the round trip")
    for (a, b) in zip(first.records, second.records) {
        precondition(same(a, b), "a record changed in the round trip beyond the writer's rounding: \(a) → \(b)")
    }
    let again = JSONBatch.encode(device: second.device, records: second.records)
    precondition(again == encoded, "encode(decode(encode(x))) != encode(x)")
    precondition(try! JSONBatch.decode(again, now: now).records == second.records, "decode is not stable")
    return 0
}

/// Whether every number of `r` has a fixed-decimal form (`ByteWriting.appendFixed` writes null
/// past 9e18 once scaled).
func writable(_ r: TrailRecord) -> Bool {
    let values: [(Double?, Double)] = [
        (r.latitude, 1e9), (r.longitude, 1e9), (r.altitude, 1e3), (r.horizontalAccuracy, 1e2),
        (r.verticalAccuracy, 1e2), (r.speed, 1e3), (r.course, 1e2),
        (r.span?.endLatitude, 1e9), (r.span?.endLongitude, 1e9),
        (r.span?.distance, 1e1), (r.span?.maximumSpeed, 1e3),
    ]
    return values.allSatisfy { v, scale in v.map { abs($0) * scale < 9e18 } ?? true }
}

/// Equal up to the writer's rounding: times to the millisecond, coordinates to 9 decimals,
/// altitude and speed to 3, accuracies and course to 2; absent stays absent.
func same(_ a: TrailRecord, _ b: TrailRecord) -> Bool {
    func close(_ x: Double?, _ y: Double?, _ half: Double) -> Bool {
        switch (x, y) {
        case (nil, nil): true
        case (let x?, let y?): abs(x - y) <= half * 1.000001 + abs(x) * 1e-15
        default: false
        }
    }
    return a.device == b.device && a.sequence == b.sequence && a.kind == b.kind && a.region == b.region
        && close(a.time, b.time, 0.0005) && close(a.latitude, b.latitude, 5e-10)
        && close(a.longitude, b.longitude, 5e-10)
        && close(a.altitude, b.altitude, 5e-4) && close(a.horizontalAccuracy, b.horizontalAccuracy, 5e-3)
        && close(a.verticalAccuracy, b.verticalAccuracy, 5e-3) && close(a.speed, b.speed, 5e-4)
        && close(a.course, b.course, 5e-3) && close(a.span?.end, b.span?.end, 0.0005)
        && close(a.span?.endLatitude, b.span?.endLatitude, 5e-10)
        && close(a.span?.endLongitude, b.span?.endLongitude, 5e-10)
        && close(a.span?.distance, b.span?.distance, 0.05) && close(a.span?.maximumSpeed, b.span?.maximumSpeed, 5e-4)
}
