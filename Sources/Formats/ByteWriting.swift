/// Fast, allocation-free number and string formatting into byte buffers.
public enum ByteWriting {
    /// "00", "01", ... "99": two digits per division by 100 (constant bytes: no array, no lazy
    /// initialisation on the hot path).
    @usableFromInline static let digitPairs: StaticString =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

    /// 10^`n` for 0...9 (a `UInt64`, or a `Double` to scale by), without an array access: the
    /// constants fold into the caller.
    @inlinable @inline(__always)
    static func power<T: ExpressibleByIntegerLiteral>(_ n: Int) -> T {
        switch n {
        case 0: 1
        case 1: 10
        case 2: 100
        case 3: 1000
        case 4: 10_000
        case 5: 100_000
        case 6: 1_000_000
        case 7: 10_000_000
        case 8: 100_000_000
        default: 1_000_000_000
        }
    }

    /// `|value|` × 10^`decimals` rounded half away from zero (as `rounded()`), or `nil` when `value`
    /// is not finite or the result reaches 9e18. Rounds without a libm call: below 2^53 the
    /// fraction `x - trunc(x)` is exact, above it `x` is already whole.
    @inlinable @inline(__always)
    static func scaledMagnitude(_ value: Double, decimals: Int) -> UInt64? {
        let x = abs(value) * (power(decimals) as Double)
        guard x < 9.0e18 else { return nil }
        let whole = Int64(x)
        return UInt64(whole) &+ (x - Double(whole) >= 0.5 ? 1 : 0)
    }

    /// Writes the decimal digits of `v` so that they end just before `end`; returns where they start.
    /// Divides by constants only (multiplications), two digits a step.
    @inlinable @inline(__always)
    static func writeDigits(_ v: UInt64, endingAt end: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        let pairs = digitPairs.utf8Start
        var v = v
        var p = end
        while v >= 100 {
            let q = v / 100
            let r = Int(v &- q &* 100) &* 2
            p -= 2
            p[0] = pairs[r]
            p[1] = pairs[r &+ 1]
            v = q
        }
        if v >= 10 {
            let r = Int(v) &* 2
            p -= 2
            p[0] = pairs[r]
            p[1] = pairs[r &+ 1]
        } else {
            p -= 1
            p[0] = UInt8(truncatingIfNeeded: v) &+ 48
        }
        return p
    }

    /// Appends `value` with exactly `decimals` fractional digits (0...9), or `null` when it is not finite
    /// or too large to print that way.
    @inlinable
    public static func appendFixed(
        _ value: Double, decimals: Int, nullText: StaticString = "null",
        to out: inout [UInt8]
    ) {
        guard let scaled = scaledMagnitude(value, decimals: decimals) else {
            appendStatic(nullText, to: &out)
            return
        }
        // Sign, up to 19 digits, a point and zero padding: 32 bytes, built from the end, appended once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { buffer in
            let end = buffer.baseAddress! + 32
            var start = writeDigits(scaled, endingAt: end)
            if decimals > 0 {
                // At least one digit before the point: pad with zeros to decimals + 1 digits.
                while end - start < decimals + 1 {
                    start -= 1
                    start[0] = 48
                }
                let point = end - decimals
                (start - 1).update(from: start, count: point - start)
                start -= 1
                (point - 1).pointee = UInt8(ascii: ".")
            }
            if value < 0 && scaled != 0 {
                start -= 1
                start[0] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeBufferPointer(start: start, count: end - start))
        }
    }

    /// Appends a decimal integer.
    @inlinable
    public static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        if value >= 0 && value < 10 {
            out.append(UInt8(truncatingIfNeeded: value) &+ 48)
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buffer in
            let end = buffer.baseAddress! + 24
            var start = writeDigits(value.magnitude, endingAt: end)
            if value < 0 {
                start -= 1
                start[0] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeBufferPointer(start: start, count: end - start))
        }
    }

    /// Appends a static ASCII string.
    @inlinable
    public static func appendStatic(_ s: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    /// Appends `{"device":DEVICE,"KEY":[...]}`, each element written by `element`: the one shape of
    /// the per-device documents (a batch's records, the endpoint's stops and trips).
    public static func appendDeviceDocument<C: Collection>(
        device: String, key: StaticString, _ elements: C, to out: inout [UInt8],
        element: (C.Element, inout [UInt8]) -> Void
    ) {
        appendStatic("{\"device\":", to: &out)
        appendJSONString(device, to: &out)
        appendStatic(",\"", to: &out)
        appendStatic(key, to: &out)
        appendStatic("\":[", to: &out)
        var first = true
        for e in elements {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            element(e, &out)
        }
        appendStatic("]}", to: &out)
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
