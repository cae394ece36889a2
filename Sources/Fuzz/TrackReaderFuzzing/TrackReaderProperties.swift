import Geo
import TrackFiles

/// The property every track reader's fuzz target checks, on any bytes: never a crash, a rejection is
/// a `TrackFileError` with a message and an offset inside the input, the fixes delivered before it
/// are on the globe; fed in two pieces split anywhere (the split taken from the input), or byte by
/// byte (inputs up to 512 bytes), the reader delivers the same fixes and the same error as fed whole.
/// A failure is a `preconditionFailure`, which libFuzzer reports as a crash with its input.
///
/// - Parameters:
///   - make: a new reader of the format.
///   - data, size: libFuzzer's input.
public func checkTrackReader<R: TrackReader>(
    _ make: () -> R, _ data: UnsafePointer<UInt8>, _ size: Int
) {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let whole = read(make(), bytes, pieces: [size])
    let split = size == 0 ? 0 : Int(bytes[0]) * size / 256
    let halves = read(make(), bytes, pieces: [split, size - split])
    precondition(whole.fixes == halves.fixes, "a split at \(split) changed the fixes")
    precondition(
        whole.error == halves.error,
        "a split at \(split) changed the error: \(whole.error ?? "none") vs \(halves.error ?? "none")")
    if size <= 512 {
        let single = read(make(), bytes, pieces: Array(repeating: 1, count: size))
        precondition(whole.fixes == single.fixes, "byte by byte changed the fixes")
        precondition(
            whole.error == single.error,
            "byte by byte changed the error: \(whole.error ?? "none") vs \(single.error ?? "none")")
    }
}

/// What `reader` delivers from `bytes` fed in `pieces`: its fixes, and its error as text (nil: none).
func read<R: TrackReader>(_ reader: R, _ bytes: UnsafeRawBufferPointer, pieces: [Int]) -> (
    fixes: [Fix], error: String?
) {
    var reader = reader
    var fixes: [Fix] = []
    var start = 0
    do throws(TrackFileError) {
        for n in pieces {
            try reader.feed(UnsafeRawBufferPointer(rebasing: bytes[start..<start + n])) { fixes.append($0) }
            start += n
        }
        try reader.finish { fixes.append($0) }
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        precondition(error.byteOffset >= 0 && error.byteOffset <= Int64(bytes.count), "an offset outside the input")
        for fix in fixes {
            precondition(fix.coordinate.map { abs($0.latitude) <= 90 && abs($0.longitude) <= 180 } ?? false)
        }
        return (fixes, "\(error.code) \(error.line) \(error.byteOffset) \(error.message)")
    }
    return (fixes, nil)
}
