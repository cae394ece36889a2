import NMEA
import Geo
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    // Feed the input whole, then split at every position derived from its first byte, in both
    // lenient and strict mode: framing must not depend on chunk boundaries.
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    var whole = NMEADecoder()
    var wholeFixes: [Fix] = []
    try? whole.decode(bytes) { wholeFixes.append($0) }
    try? whole.finish { wholeFixes.append($0) }

    let step = size > 0 ? Int(data[0] % 7) + 1 : 1
    var chunked = NMEADecoder()
    var chunkedFixes: [Fix] = []
    var i = 0
    while i < size {
        let n = min(step, size - i)
        try? chunked.decode(UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)])) { chunkedFixes.append($0) }
        i += n
    }
    try? chunked.finish { chunkedFixes.append($0) }
    precondition(wholeFixes == chunkedFixes, "chunking changed the fixes")
    precondition(whole.statistics == chunked.statistics, "chunking changed the statistics")

    var strict = NMEADecoder(options: .init(strict: true))
    _ = try? strict.decode(bytes) { _ in }
    return 0
}
