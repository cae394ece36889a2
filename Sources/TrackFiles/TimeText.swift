import Geo

/// Times as track files write them: ISO 8601 text and epoch numbers.
public enum TimeText {
    /// Parses `YYYY-MM-DD(T| )HH:MM[:SS[.fraction]][Z|±HH[:MM]|±HHMM]`; no zone is UTC.
    ///
    /// - Returns: the time, or `nil` when the text is not one (a month 13, a 25th hour, junk after it).
    public static func iso8601(_ b: UnsafeRawBufferPointer) -> GNSSTime? {
        var n = b.count
        // Surrounding blanks, as spreadsheets leave them.
        var s = 0
        while s < n, b[s] == 0x20 || b[s] == 0x09 { s += 1 }
        while n > s, b[n - 1] == 0x20 || b[n - 1] == 0x09 || b[n - 1] == 0x0D { n -= 1 }
        func digits(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= n else { return nil }
            var v = 0
            for i in at..<at + count {
                let d = Int(b[i]) &- 48
                guard d >= 0 && d <= 9 else { return nil }
                v = v * 10 + d
            }
            return v
        }
        guard let year = digits(s, 4), s + 16 <= n, b[s + 4] == 0x2D, let month = digits(s + 5, 2), b[s + 7] == 0x2D,
            let day = digits(s + 8, 2),
            b[s + 10] == UInt8(ascii: "T") || b[s + 10] == 0x20
                || b[s + 10] == UInt8(ascii: "t"),
            let hour = digits(s + 11, 2), b[s + 13] == 0x3A, let minute = digits(s + 14, 2),
            (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month), hour < 24, minute < 60
        else { return nil }
        var i = s + 16
        var second = 0
        var nanos: Int64 = 0
        var fractionDigits: UInt8 = 0
        if i < n, b[i] == 0x3A {
            guard let sec = digits(i + 1, 2), sec <= 60 else { return nil }
            second = sec
            i += 3
            if i < n, b[i] == 0x2E || b[i] == 0x2C {
                i += 1
                guard let f = fraction(b, at: &i, end: n) else { return nil }
                (nanos, fractionDigits) = f
            }
        }
        var offset = 0
        if i < n {
            if (b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z")) && i + 1 == n {
                offset = 0
            } else if b[i] == 0x2B || b[i] == 0x2D, let h = digits(i + 1, 2), h <= 23 {
                var m = 0
                switch n - i {
                case 3: m = 0
                case 5:
                    guard let mm = digits(i + 3, 2) else { return nil }
                    m = mm
                case 6:
                    guard b[i + 3] == 0x3A, let mm = digits(i + 4, 2) else { return nil }
                    m = mm
                default: return nil
                }
                guard m < 60 else { return nil }
                offset = (b[i] == 0x2D ? -1 : 1) * (h * 3600 + m * 60)
            } else {
                return nil
            }
        }
        // Nanoseconds since 1970 in an Int64 reach 2262: later (and earlier than 1970) is no track's time.
        guard (1970...2261).contains(year) else { return nil }
        let days = Int64(GNSSTime.daysFromCivil(year: year, month: month, day: day))
        let total =
            days * GNSSTime.nanosecondsPerDay
            + Int64(hour * 3600 + minute * 60 + second - offset) * 1_000_000_000 + nanos
        guard total >= 0 else { return nil }
        return GNSSTime(nanosecondsSince1970: total, fractionDigits: fractionDigits)
    }

    /// The fraction of a second whose digits start at `i` (after its separator) and end by `n`, in
    /// nanoseconds, with how many digits it has (at most 9 count), `i` moved past them; `nil` when
    /// no digit is there.
    static func fraction(_ b: UnsafeRawBufferPointer, at i: inout Int, end n: Int) -> (nanos: Int64, digits: UInt8)? {
        let start = i
        var nanos: Int64 = 0
        var scale: Int64 = 100_000_000
        while i < n, b[i] >= 48, b[i] <= 57 {
            nanos += Int64(b[i] - 48) * scale
            scale /= 10
            i += 1
        }
        guard i > start else { return nil }
        return (nanos, UInt8(min(i - start, 9)))
    }

    /// ``iso8601(_:)`` on a string.
    public static func iso8601(_ text: String) -> GNSSTime? {
        var t = text
        return t.withUTF8 { iso8601(UnsafeRawBufferPointer($0)) }
    }

    /// Parses an epoch number: seconds, or milliseconds when it is 100,000,000,000 or more
    /// (after 1973-03-03 in milliseconds, past the year 5138 in seconds); a fraction is allowed.
    ///
    /// - Returns: the time, or `nil` when the text is not a non-negative number before 2262 (the
    ///   last year nanoseconds since 1970 hold in 64 bits).
    public static func epoch(_ b: UnsafeRawBufferPointer) -> GNSSTime? {
        var n = b.count
        var i = 0
        while i < n, b[i] == 0x20 || b[i] == 0x09 { i += 1 }
        while n > i, b[n - 1] == 0x20 || b[n - 1] == 0x09 || b[n - 1] == 0x0D { n -= 1 }
        var whole: Int64 = 0
        let start = i
        while i < n, b[i] >= 48, b[i] <= 57 {
            guard whole < 100_000_000_000_000 else { return nil }
            whole = whole * 10 + Int64(b[i] - 48)
            i += 1
        }
        guard i > start else { return nil }
        var fraction: Int64 = 0
        var fractionDigits: UInt8 = 0
        if i < n, b[i] == 0x2E {
            i += 1
            guard let f = Self.fraction(b, at: &i, end: n) else { return nil }
            (fraction, fractionDigits) = f
        }
        guard i == n else { return nil }
        let nanos: Int64
        if whole >= 100_000_000_000 {
            // Milliseconds (a fraction of a millisecond is kept).
            guard whole < 9_200_000_000_000 else { return nil }
            nanos = whole * 1_000_000 + fraction / 1000
            return GNSSTime(nanosecondsSince1970: nanos, fractionDigits: 3)
        }
        guard whole < 9_200_000_000 else { return nil }
        nanos = whole * 1_000_000_000 + fraction
        return GNSSTime(nanosecondsSince1970: nanos, fractionDigits: fractionDigits)
    }

    /// ISO 8601 or, failing that, an epoch number.
    public static func any(_ b: UnsafeRawBufferPointer) -> GNSSTime? {
        iso8601(b) ?? epoch(b)
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
