/// A problem in one field, before the decoder adds where it happened.
@usableFromInline
struct FieldError: Error {
    @usableFromInline var code: NMEAError.Code
    @usableFromInline var field: Int
    @usableFromInline var message: StaticString

    @usableFromInline
    init(_ code: NMEAError.Code, field: Int, _ message: StaticString) {
        self.code = code
        self.field = field
        self.message = message
    }
}

/// The comma-separated fields of one sentence body (after `$`, before `*`), addressed without copying.
///
/// Field 0 is the address (`GPGGA`). Fields past the end read as empty, so optional trailing
/// fields of newer NMEA versions need no special casing.
@usableFromInline
struct Fields {
    @usableFromInline let base: UnsafePointer<UInt8>
    /// `bounds[i + 1]` is the offset of the comma (or end) after field `i`; `bounds[0]` is -1,
    /// so field `i` spans `bounds[i] + 1 ..< bounds[i + 1]` without a branch.
    @usableFromInline let bounds: UnsafeMutablePointer<Int16>
    @usableFromInline let count: Int

    @inline(__always)
    func start(_ i: Int) -> Int { Int(bounds[i]) &+ 1 }

    @inline(__always)
    func end(_ i: Int) -> Int { Int(bounds[i &+ 1]) }

    @inline(__always)
    func isEmpty(_ i: Int) -> Bool { i >= count || start(i) == end(i) }

    @inline(__always)
    func length(_ i: Int) -> Int { i >= count ? 0 : end(i) - start(i) }

    /// The first byte of field `i`, or 0 when the field is empty or missing.
    @inline(__always)
    func char(_ i: Int) -> UInt8 { isEmpty(i) ? 0 : base[start(i)] }

    /// An unsigned integer, or `nil` for an empty field.
    @inline(__always)
    func uint(_ i: Int) throws(FieldError) -> Int? {
        if isEmpty(i) { return nil }
        var v = 0
        var p = start(i)
        let e = end(i)
        if e - p > 9 { throw FieldError(.malformedField, field: i, "integer too long") }
        while p < e {
            let d = base[p] &- 48
            if d > 9 { throw FieldError(.malformedField, field: i, "expected digits") }
            v = v &* 10 &+ Int(d)
            p += 1
        }
        return v
    }

    /// A decimal number (`-12.345`, `+7`, `.5`), or `nil` for an empty field.
    @inline(__always)
    func decimal(_ i: Int) throws(FieldError) -> Double? {
        if isEmpty(i) { return nil }
        var p = start(i)
        let e = end(i)
        var negative = false
        let first = base[p]
        if first == 0x2D {  // -
            negative = true
            p &+= 1
        } else if first == 0x2B {  // +
            p &+= 1
        }
        // At most 18 digits fit a UInt64 exactly; longer numbers are not NMEA.
        if e &- p > 19 { throw FieldError(.malformedField, field: i, "number too long") }
        var mantissa: UInt64 = 0
        let digitsStart = p
        while p < e {
            let d = base[p] &- 48
            if d > 9 { break }
            mantissa = mantissa &* 10 &+ UInt64(d)
            p &+= 1
        }
        var intDigits = p &- digitsStart
        var scale = 0
        if p < e {
            scale = try fraction(i, from: p, to: e, onto: &mantissa, "expected a decimal number")
            intDigits &+= scale
        }
        if intDigits == 0 || intDigits > 18 {
            throw FieldError(.malformedField, field: i, "expected a decimal number")
        }
        let v = Double(mantissa) / powerOfTen(scale)
        return negative ? -v : v
    }

    /// Reads `.ddd…` at `p` (the point included) up to `e`, appending the digits to `value`.
    /// Returns how many digits there were.
    @inline(__always)
    func fraction(_ i: Int, from start: Int, to e: Int, onto value: inout UInt64, _ message: StaticString)
        throws(FieldError) -> Int
    {
        guard base[start] == 0x2E else { throw FieldError(.malformedField, field: i, message) }
        var p = start &+ 1
        while p < e {
            let d = base[p] &- 48
            if d > 9 { throw FieldError(.malformedField, field: i, message) }
            value = value &* 10 &+ UInt64(d)
            p &+= 1
        }
        return p &- start &- 1
    }

    /// `hhmmss` or `hhmmss.s…`: nanoseconds of the day and the number of fractional digits.
    @inline(__always)
    func time(_ i: Int) throws(FieldError) -> (nanoseconds: Int64, digits: UInt8)? {
        if isEmpty(i) { return nil }
        let s = start(i)
        let e = end(i)
        if e - s < 6 { throw FieldError(.malformedField, field: i, "expected hhmmss time") }
        @inline(__always) func pair(_ k: Int) throws(FieldError) -> Int {
            let d1 = base[s + 2 * k] &- 48, d2 = base[s + 2 * k + 1] &- 48
            if d1 > 9 || d2 > 9 { throw FieldError(.malformedField, field: i, "expected hhmmss time") }
            return Int(d1) * 10 + Int(d2)
        }
        let hh = try pair(0), mm = try pair(1), ss = try pair(2)
        if hh > 23 || mm > 59 || ss > 60 {
            throw FieldError(.fieldOutOfRange, field: i, "time of day out of range")
        }
        var nanos: Int64 = 0
        var digits: UInt8 = 0
        var p = s + 6
        if p < e {
            if base[p] != UInt8(ascii: ".") { throw FieldError(.malformedField, field: i, "expected hhmmss time") }
            p += 1
            var scale: Int64 = 100_000_000
            while p < e {
                let d = base[p] &- 48
                if d > 9 { throw FieldError(.malformedField, field: i, "expected hhmmss time") }
                if digits < 9 {
                    nanos += Int64(d) * scale
                    scale /= 10
                    digits += 1
                }
                p += 1
            }
        }
        return (Int64(hh * 3600 + mm * 60 + ss) * 1_000_000_000 + nanos, digits)
    }

    /// A latitude (`ddmm.mmmm` + `N`/`S` in field `i + 1`) in degrees, or `nil` when empty.
    @inline(__always)
    func latitude(_ i: Int) throws(FieldError) -> Double? {
        try angle(i, degreeDigits: 2, positive: UInt8(ascii: "N"), negative: UInt8(ascii: "S"), limit: 90)
    }

    /// A longitude (`dddmm.mmmm` + `E`/`W` in field `i + 1`) in degrees, or `nil` when empty.
    @inline(__always)
    func longitude(_ i: Int) throws(FieldError) -> Double? {
        try angle(i, degreeDigits: 3, positive: UInt8(ascii: "E"), negative: UInt8(ascii: "W"), limit: 180)
    }

    @inline(__always)
    func angle(_ i: Int, degreeDigits: Int, positive: UInt8, negative: UInt8, limit: Double) throws(FieldError)
        -> Double?
    {
        if isEmpty(i) { return nil }
        let s = start(i)
        let e = end(i)
        if e &- s > 22 { throw FieldError(.malformedField, field: i, "expected ddmm.mmmm") }
        // Integer part: degrees then two digits of minutes. Some receivers drop leading zeros.
        var intPart = 0
        var p = s
        while p < e {
            let d = base[p] &- 48
            if d > 9 { break }
            intPart = intPart &* 10 &+ Int(d)
            p &+= 1
        }
        let intDigits = p &- s
        if intDigits < 3 || intDigits > degreeDigits &+ 2 {
            throw FieldError(.malformedField, field: i, "expected ddmm.mmmm")
        }
        var frac: UInt64 = 0
        var scale = 0
        if p < e {
            scale = try fraction(i, from: p, to: e, onto: &frac, "expected ddmm.mmmm")
        }
        let degrees = intPart / 100
        let wholeMinutes = intPart &- degrees &* 100
        if wholeMinutes >= 60 { throw FieldError(.fieldOutOfRange, field: i, "minutes must be below 60") }
        let minutes = Double(wholeMinutes) + Double(frac) / powerOfTen(scale)
        var value = Double(degrees) + minutes / 60
        if value > limit { throw FieldError(.fieldOutOfRange, field: i, "angle out of range") }
        let h = char(i &+ 1)
        if h == negative {
            value = -value
        } else if h != positive {
            throw FieldError(.malformedField, field: i &+ 1, "expected a hemisphere letter")
        }
        return value
    }
}

/// 10^n for n in 0...18, without a global table (whose lazy initialisation costs a check per use).
@inline(__always)
func powerOfTen(_ n: Int) -> Double {
    switch n {
    case 0: 1
    case 1: 1e1
    case 2: 1e2
    case 3: 1e3
    case 4: 1e4
    case 5: 1e5
    case 6: 1e6
    case 7: 1e7
    case 8: 1e8
    case 9: 1e9
    case 10: 1e10
    case 11: 1e11
    case 12: 1e12
    case 13: 1e13
    case 14: 1e14
    case 15: 1e15
    case 16: 1e16
    case 17: 1e17
    default: 1e18
    }
}
