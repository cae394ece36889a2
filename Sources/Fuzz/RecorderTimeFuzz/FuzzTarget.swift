import Formats

/// `RecorderAPI.parseTime` on any text (the `from` and `to` of `/api/0/locations`): never a crash,
/// `nil` for what is not a time; a time it accepts is finite, within what ISO 8601 writes with a
/// four-digit year, and its whole seconds read back the same from the Recorder's `isotst` form.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    guard let seconds = RecorderAPI.parseTime(text) else { return 0 }
    precondition(seconds.isFinite && ISOTime.representable.contains(seconds), "'\(text)' gave \(seconds)")
    var iso: [UInt8] = []
    RecorderAPI.appendISOTime(seconds, to: &iso)
    let written = String(decoding: iso, as: UTF8.self)
    guard let again = RecorderAPI.parseTime(written) else { preconditionFailure("'\(written)' does not parse") }
    precondition(again == seconds.rounded(.down), "'\(text)' → '\(written)' moved the time")
    return 0
}
