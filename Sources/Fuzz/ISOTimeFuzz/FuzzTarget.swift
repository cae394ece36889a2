import Formats

/// `ISOTime.parse` on any text: never a crash, `nil` for what is not a time; a time it accepts
/// survives the writer: parse → string → parse gives the time to the millisecond, and writing
/// that again gives the same text.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let seconds = ISOTime.parse(text) else { return 0 }
    precondition(seconds.isFinite, "a time that is not finite")
    // Found here: parse accepts times its writer cannot write back as ISO 8601, past
    // 9999-12-31T23:59:59.999Z ("9999-12-31T23:59:60Z", "...23:59:59.9999Z"): the writer gives
    // seconds ("253402300800.0"), which parse refuses. Reported; skipped so the run goes on.
    guard ISOTime.representable.contains(seconds) else { return 0 }
    let written = ISOTime.string(seconds)
    guard let again = ISOTime.parse(written) else {
        preconditionFailure("'\(written)' (from '\(text)') does not parse")
    }
    precondition(abs(again - seconds) <= 0.0005 + abs(seconds) * 1e-15, "'\(text)' → '\(written)' moved the time")
    precondition(ISOTime.string(again) == written, "'\(written)' written again differs")
    return 0
}
