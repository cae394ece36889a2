import Foundation
import Geo
import NMEA
import KeepTrackTesting

/// `$BODY*hh\r\n` with the correct checksum.
func nmea(_ body: String, ending: String = "\r\n") -> String {
    let x = body.utf8.reduce(UInt8(0), ^)
    return "$" + body + "*" + String(format: "%02X", x) + ending
}

/// Decodes `bytes` fed in chunks of `chunk` bytes; collects fixes, errors and statistics.
func decodeChunked(_ bytes: [UInt8], chunk: Int, options: NMEADecoder.Options = .init())
    -> (fixes: [Fix], errors: [NMEAError], statistics: NMEAStatistics)
{
    var decoder = NMEADecoder(options: options)
    var errors: [NMEAError] = []
    decoder.diagnosticHandler = { errors.append($0) }
    var fixes: [Fix] = []
    bytes.withUnsafeBytes { raw in
        var i = 0
        while i < raw.count {
            let n = min(chunk, raw.count - i)
            try? decoder.decode(UnsafeRawBufferPointer(rebasing: raw[i..<(i + n)])) { fixes.append($0) }
            i += n
        }
    }
    try? decoder.finish { fixes.append($0) }
    return (fixes, errors, decoder.statistics)
}

func decode(_ text: String, options: NMEADecoder.Options = .init()) -> (
    fixes: [Fix], errors: [NMEAError], statistics: NMEAStatistics
) {
    decodeChunked(Array(text.utf8), chunk: Int.max, options: options)
}
