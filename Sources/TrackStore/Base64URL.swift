/// base64url without padding (RFC 4648 section 5).
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let n = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if i + 1 < bytes.count { out.append(alphabet[Int(n >> 6 & 63)]) }
            if i + 2 < bytes.count { out.append(alphabet[Int(n & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `count` random bytes from the system's generator, encoded; the text never begins with `-`, so
    /// it reads as an argument on a command line (`share remove ID`, `--token TOKEN`), never as an
    /// option. The first byte is drawn again while it would encode as `-` (0xF8-0xFB): 1 draw in 64,
    /// and the others stay equally likely.
    public static func randomArgument(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        while let first = bytes.first, first >> 2 == 62 { bytes[0] = UInt8.random(in: 0...255, using: &generator) }
        return encode(bytes)
    }

    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt32] = []
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): values.append(UInt32(c - UInt8(ascii: "A")))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): values.append(UInt32(c - UInt8(ascii: "a")) + 26)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): values.append(UInt32(c - UInt8(ascii: "0")) + 52)
            case UInt8(ascii: "-"): values.append(62)
            case UInt8(ascii: "_"): values.append(63)
            default: return nil
            }
        }
        if values.count % 4 == 1 { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            var n: UInt32 = 0
            for (k, v) in chunk.enumerated() { n |= v << (18 - 6 * UInt32(k)) }
            out.append(UInt8(n >> 16 & 255))
            if chunk.count > 2 { out.append(UInt8(n >> 8 & 255)) }
            if chunk.count > 3 { out.append(UInt8(n & 255)) }
            i += 4
        }
        return out
    }
}
