/// A strict, allocation-light JSON reader over bytes, for the flat objects of our wire formats:
/// strings, numbers, `null`, booleans; nested values can be skipped, up to ``maxDepth`` levels.
/// Strings must be valid UTF-8 (RFC 8259). Errors name the byte offset.
struct JSONScanner {
    /// How deeply a skipped value may nest arrays and objects. Deeper input is refused, not
    /// recursed into: a body of 200,000 `[` must not overflow the stack.
    static let maxDepth = 64

    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The scanner's error: every reader of JSON in this module throws it as it is (``FormatsError/Code/malformedJSON``).
    typealias Failure = FormatsError

    func fail(_ what: String) -> Failure {
        guard i < bytes.count else { return FormatsError(.malformedJSON, "malformed JSON: the body ends early") }
        return FormatsError(.malformedJSON, "malformed JSON at byte \(i): \(what)", byteOffset: i)
    }

    mutating func skipWhitespace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    /// Consumes `c` (after whitespace), or fails.
    mutating func expect(_ c: UInt8) throws(Failure) {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == c else { throw fail("expected '\(Character(Unicode.Scalar(c)))'") }
        i += 1
    }

    /// Consumes `c` (after whitespace) if it is next.
    mutating func take(_ c: UInt8) -> Bool {
        skipWhitespace()
        if i < bytes.count, bytes[i] == c {
            i += 1
            return true
        }
        return false
    }

    var atEnd: Bool {
        mutating get {
            skipWhitespace()
            return i >= bytes.count
        }
    }

    /// The raw bytes of a string without escapes, as a range, or `nil` when it has escapes (then
    /// ``string()`` decodes it).
    mutating func string() throws(Failure) -> String {
        skipWhitespace()
        guard i < bytes.count, bytes[i] == 0x22 else { throw fail("expected a string") }
        i += 1
        let start = i
        var high: UInt8 = 0
        while i < bytes.count, bytes[i] != 0x22, bytes[i] != 0x5C, bytes[i] >= 0x20 {
            high |= bytes[i]
            i += 1
        }
        guard i < bytes.count else { throw fail("unterminated string") }
        if high >= 0x80, let bad = invalidUTF8Offset(bytes[start..<i]) {
            i = bad
            throw fail("invalid UTF-8 in a string")
        }
        if bytes[i] == 0x22 {
            defer { i += 1 }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }
        // Escapes: decode the rest the slow way.
        var out = Array(bytes[start..<i])
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let c = bytes[i]
            if c == 0x22 {
                i += 1
                return String(decoding: out, as: UTF8.self)
            }
            if c < 0x20 { throw fail("a control character in a string") }
            if c != 0x5C {
                if c >= 0x80 {
                    // A whole multi-byte sequence, validated where it stands.
                    var end = i + 1
                    while end < bytes.count, bytes[end] & 0xC0 == 0x80, end - i < 4 { end += 1 }
                    if invalidUTF8Offset(bytes[i..<end]) != nil { throw fail("invalid UTF-8 in a string") }
                    out.append(contentsOf: bytes[i..<end])
                    i = end
                    continue
                }
                out.append(c)
                i += 1
                continue
            }
            i += 1
            guard i < bytes.count else { throw fail("unterminated string") }
            let e = bytes[i]
            i += 1
            switch e {
            case 0x22, 0x5C, 0x2F: out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800..<0xDC00).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == 0x5C, bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("an unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("an unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("an invalid \\u escape") }
                out.append(contentsOf: String(Character(u)).utf8)
            default: throw fail("an invalid escape")
            }
        }
    }

    mutating func hex4() throws(Failure) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("a short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - 48)
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - 87)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - 55)
            default: throw fail("a bad \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    /// A value as the record fields need it.
    enum Value {
        case string(String)
        case number(Double)
        case bool(Bool)
        case null
        /// An array or an object (skipped).
        case other
    }

    mutating func value() throws(Failure) -> Value {
        skipWhitespace()
        guard i < bytes.count else { throw fail("expected a value") }
        switch bytes[i] {
        case 0x22: return .string(try string())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try skipValue()
            return .other
        default: throw fail("expected a value")
        }
    }

    mutating func literal(_ word: StaticString) throws(Failure) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw fail("expected \(word)") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw fail("expected \(word)") }
        i += n
    }

    /// A JSON number (strict grammar), as a Double.
    mutating func number() throws(Failure) -> Double {
        let start = i
        // The digits as an integer and a power of ten, as long as that is exact: the usual number
        // (a coordinate, 48.1372010) is then one correctly rounded division or multiplication
        // (Clinger's fast path), with no String made and no strtod.
        var mantissa: UInt64 = 0
        var exact = true
        var scale = 0
        func digit(_ d: UInt8) {
            if mantissa <= Self.mantissaLimit / 10 { mantissa = mantissa * 10 + UInt64(d - 48) } else { exact = false }
        }
        let negative = i < bytes.count && bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 else { throw fail("expected a number") }
        if bytes[i] == 48 {
            i += 1
        } else {
            while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
                digit(bytes[i])
                i += 1
            }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 else { throw fail("expected digits after '.'") }
            while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
                digit(bytes[i])
                scale -= 1
                i += 1
            }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            var sign = 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") {
                if bytes[i] == UInt8(ascii: "-") { sign = -1 }
                i += 1
            }
            guard i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 else { throw fail("expected an exponent") }
            var exponent = 0
            while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
                if exponent < 10_000 { exponent = exponent * 10 + Int(bytes[i] - 48) } else { exact = false }
                i += 1
            }
            scale += sign * exponent
        }
        if exact, mantissa <= Self.mantissaLimit, scale >= -22, scale <= 22 {
            // Both operands are exact doubles (the mantissa at most 2^53; 10^22 = 5^22 · 2^22 with
            // 5^22 < 2^53), so the one operation rounds the exact value once, as strtod does.
            let m = Double(mantissa)
            let v = scale < 0 ? m / Self.powersOfTen[-scale] : m * Self.powersOfTen[scale]
            return negative ? -v : v
        }
        guard let v = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else { throw fail("a bad number") }
        return v
    }

    /// The largest integer a double holds exactly with all below it: 2^53.
    static let mantissaLimit: UInt64 = 1 << 53
    /// 10^0 ... 10^22, each exact as a double.
    static let powersOfTen: [Double] = (0...22).map { e in
        var p = 1.0
        for _ in 0..<e { p *= 10 }
        return p
    }

    /// Skips any value, nested ones included, up to ``maxDepth`` levels of arrays and objects.
    mutating func skipValue(depth: Int = 0) throws(Failure) {
        skipWhitespace()
        guard i < bytes.count else { throw fail("expected a value") }
        switch bytes[i] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < Self.maxDepth else {
                throw fail("arrays and objects nested deeper than \(Self.maxDepth) levels")
            }
            if bytes[i] == UInt8(ascii: "{") {
                i += 1
                if take(UInt8(ascii: "}")) { return }
                repeat {
                    _ = try string()
                    try expect(UInt8(ascii: ":"))
                    try skipValue(depth: depth + 1)
                } while take(UInt8(ascii: ","))
                try expect(UInt8(ascii: "}"))
            } else {
                i += 1
                if take(UInt8(ascii: "]")) { return }
                repeat { try skipValue(depth: depth + 1) } while take(UInt8(ascii: ","))
                try expect(UInt8(ascii: "]"))
            }
        default:
            _ = try value()
        }
    }
}

/// The offset (in `bytes`' indices) of the first byte that is not well-formed UTF-8 (RFC 3629:
/// no overlong forms, no surrogates, nothing above U+10FFFF), or `nil` when all of it is.
func invalidUTF8Offset(_ bytes: ArraySlice<UInt8>) -> Int? {
    var i = bytes.startIndex
    let end = bytes.endIndex
    while i < end {
        let b = bytes[i]
        if b < 0x80 {
            i += 1
            continue
        }
        let n: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch b {
        case 0xC2...0xDF: n = 1
        case 0xE0: n = 2; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: n = 2
        case 0xED: n = 2; high = 0x9F
        case 0xF0: n = 3; low = 0x90
        case 0xF1...0xF3: n = 3
        case 0xF4: n = 3; high = 0x8F
        default: return i
        }
        guard end - i > n else { return i }
        let c = bytes[i + 1]
        guard c >= low && c <= high else { return i }
        for k in 2..<(n + 1) where bytes[i + k] & 0xC0 != 0x80 { return i }
        i += n + 1
    }
    return nil
}
