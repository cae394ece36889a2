import Formats

/// A fixed "now" so that runs are reproducible (2024-05-14T12:00:00Z).
let now = 1_715_688_000.0

/// `OwnTracks.decode` on any body: never a crash, a rejection is a `FormatsError`; a record
/// it accepts survives the encoder: decode → encode → decode is accepted again and encodes to the
/// same bytes (the first encoding rounds to OwnTracks' integers and seven decimals).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let first: TrailRecord?
    do throws(FormatsError) {
        first = try OwnTracks.decode(bytes, device: "phone", now: now)
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        return 0
    }
    guard let first else { return 0 }
    // Found here: decode accepts any finite acc, alt, vel, cog; encode traps converting one of
    // 9.2e18 or more to Int64 ("vel":1.7e78 → SIGILL). Reported; skipped so the run goes on.
    let integers = [first.horizontalAccuracy, first.altitude, first.speed.map { $0 * 3.6 }, first.course, first.time]
    guard integers.allSatisfy({ $0.map { abs($0.rounded()) < 9.2e18 } ?? true }) else { return 0 }
    guard let encoded = OwnTracks.encode(first) else { return 0 }
    let second: TrailRecord?
    do throws(FormatsError) {
        second = try OwnTracks.decode(encoded, device: "phone", now: now)
    } catch {
        preconditionFailure(
            "an accepted record, encoded, is refused: \(error): \(String(decoding: encoded, as: UTF8.self))")
    }
    guard let second else { preconditionFailure("an accepted record, encoded, is not a location or transition") }
    precondition(second.kind == first.kind && second.region == first.region, "kind or region changed in the round trip")
    precondition(OwnTracks.encode(second) == encoded, "encode(decode(encode(x))) != encode(x)")
    return 0
}
