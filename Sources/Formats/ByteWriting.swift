/// Fast, allocation-free number and string formatting into byte buffers.
public enum ByteWriting {
    @usableFromInline static let pow10: [Int64] = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000]

    /// Appends `value` with exactly `decimals` fractional digits (0...9), or `null` when it is not finite
    /// or too large to print that way.
    @inlinable
    public static func appendFixed(_ value: Double, decimals: Int, nullText: StaticString = "null",
                                   to out: inout [UInt8]) {
        let scale = Double(pow10[decimals])
        guard value.isFinite, abs(value) * scale < 9.0e18 else {
            appendStatic(nullText, to: &out)
            return
        }
        var scaled = Int64((abs(value) * scale).rounded())
        if value < 0 && scaled != 0 { out.append(UInt8(ascii: "-")) }
        let p = pow10[decimals]
        let whole = scaled / p
        scaled %= p
        appendInt(whole, to: &out)
        if decimals > 0 {
            out.append(UInt8(ascii: "."))
            var d = p / 10
            while d > 0 {
                out.append(UInt8(ascii: "0") &+ UInt8(scaled / d % 10))
                d /= 10
            }
        }
    }

    /// Appends a decimal integer.
    @inlinable
    public static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        if value < 0 {
            out.append(UInt8(ascii: "-"))
            if value == .min {
                out.append(contentsOf: Array("9223372036854775808".utf8))
                return
            }
            appendInt(-value, to: &out)
            return
        }
        if value < 10 {
            out.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        var v = value
        withUnsafeMutableBytes(of: &digits) { d in
            while v > 0 {
                d[n] = UInt8(ascii: "0") &+ UInt8(v % 10)
                v /= 10
                n += 1
            }
            while n > 0 {
                n -= 1
                out.append(d[n])
            }
        }
    }

    /// Appends a static ASCII string.
    @inlinable
    public static func appendStatic(_ s: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// Appends a JSON string literal, quoted and escaped.
    public static func appendJSONString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): appendStatic("\\\"", to: &out)
            case UInt8(ascii: "\\"): appendStatic("\\\\", to: &out)
            case 0x0A: appendStatic("\\n", to: &out)
            case 0x0D: appendStatic("\\r", to: &out)
            case 0x09: appendStatic("\\t", to: &out)
            case 0..<0x20:
                appendStatic("\\u00", to: &out)
                let hex = Array("0123456789abcdef".utf8)
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 15)])
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends text escaped for XML character data and attribute values.
    public static func appendXMLEscaped(_ s: String, to out: inout [UInt8]) {
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "&"): appendStatic("&amp;", to: &out)
            case UInt8(ascii: "<"): appendStatic("&lt;", to: &out)
            case UInt8(ascii: ">"): appendStatic("&gt;", to: &out)
            case UInt8(ascii: "\""): appendStatic("&quot;", to: &out)
            default: out.append(b)
            }
        }
    }
}

/// `v` with `decimals` digits after the point and no exponent, as the byte writers format it
/// (`48.137366333`).
public func formatFixed(_ v: Double, _ decimals: Int) -> String {
    var out: [UInt8] = []
    ByteWriting.appendFixed(v, decimals: decimals, to: &out)
    return String(decoding: out, as: UTF8.self)
}

/// A whole number with thousands separators, as the command line prints counts: `12,345,678`.
public func grouped(_ n: some BinaryInteger) -> String {
    let s = String(n)
    var out = ""
    for (i, c) in s.reversed().enumerated() {
        if i > 0 && i % 3 == 0 && c != "-" { out.append(",") }
        out.append(c)
    }
    return String(out.reversed())
}
