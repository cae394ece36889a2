/// A UTC instant as a GNSS receiver reports it: a time of day with the log's own precision,
/// and a date when one is known.
///
/// NMEA sentences carry the time of day in every epoch but the date only in some sentences
/// (RMC, ZDA). A log without either has no date at all: such times keep `day == nil` and print
/// as a time of day only.
public struct GNSSTime: Hashable, Sendable {
    /// Days since 1970-01-01 (UTC), or `nil` when the date is unknown.
    public var day: Int32?
    /// Nanoseconds since midnight UTC, in `0..<86_400_000_000_000` (a leap second may reach 86_401 s).
    public var nanosecondOfDay: Int64
    /// How many fractional digits the source gave for the seconds (e.g. 2 for `123519.00`).
    public var fractionDigits: UInt8

    public static let nanosecondsPerDay: Int64 = 86_400_000_000_000

    @inlinable
    public init(day: Int32?, nanosecondOfDay: Int64, fractionDigits: UInt8 = 0) {
        self.day = day
        self.nanosecondOfDay = nanosecondOfDay
        self.fractionDigits = fractionDigits
    }

    /// Creates a time from calendar fields (proleptic Gregorian, UTC).
    public init(
        year: Int, month: Int, dayOfMonth: Int, hour: Int, minute: Int, second: Int, nanosecond: Int64 = 0,
        fractionDigits: UInt8 = 0
    ) {
        self.day = Int32(GNSSTime.daysFromCivil(year: year, month: month, day: dayOfMonth))
        self.nanosecondOfDay = Int64(hour * 3600 + minute * 60 + second) * 1_000_000_000 + nanosecond
        self.fractionDigits = fractionDigits
    }

    /// Seconds since 1970-01-01T00:00:00Z, or `nil` when the date is unknown.
    @inlinable
    public var secondsSince1970: Double? {
        guard let day else { return nil }
        return Double(day) * 86_400 + Double(nanosecondOfDay) / 1e9
    }

    /// Nanoseconds since 1970-01-01T00:00:00Z, or `nil` when the date is unknown.
    @inlinable
    public var nanosecondsSince1970: Int64? {
        guard let day else { return nil }
        return Int64(day) * GNSSTime.nanosecondsPerDay + nanosecondOfDay
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    @inlinable
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The calendar date of a day number (inverse of ``daysFromCivil(year:month:day:)``).
    @inlinable
    public static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// ISO 8601 in UTC: `2024-03-09T12:00:01.50Z`, keeping the source's fractional digits;
    /// `12:00:01.50Z` when the date is unknown.
    public var iso8601: String {
        var out = [UInt8]()
        out.reserveCapacity(32)
        appendISO8601(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends ``iso8601`` to a byte buffer without creating a `String`.
    public func appendISO8601(to out: inout [UInt8]) {
        @inline(__always) func two(_ v: Int) {
            out.append(UInt8(ascii: "0") &+ UInt8(v / 10))
            out.append(UInt8(ascii: "0") &+ UInt8(v % 10))
        }
        if let day {
            let (y, m, d) = GNSSTime.civilFromDays(Int(day))
            if y < 0 || y > 9999 {
                out.append(contentsOf: Array(String(y).utf8))
            } else {
                two(y / 100)
                two(y % 100)
            }
            out.append(UInt8(ascii: "-"))
            two(m)
            out.append(UInt8(ascii: "-"))
            two(d)
            out.append(UInt8(ascii: "T"))
        }
        let secondsOfDay = Int(nanosecondOfDay / 1_000_000_000)
        let nanos = Int(nanosecondOfDay % 1_000_000_000)
        two(min(secondsOfDay / 3600, 99))
        out.append(UInt8(ascii: ":"))
        two(secondsOfDay / 60 % 60)
        out.append(UInt8(ascii: ":"))
        // A leap second (23:59:60) keeps its 60.
        two(secondsOfDay >= 86_400 ? 60 : secondsOfDay % 60)
        if fractionDigits > 0 {
            out.append(UInt8(ascii: "."))
            var divisor = 100_000_000
            for _ in 0..<min(Int(fractionDigits), 9) {
                out.append(UInt8(ascii: "0") &+ UInt8(nanos / divisor % 10))
                divisor /= 10
            }
        }
        out.append(UInt8(ascii: "Z"))
    }
}

extension GNSSTime: Comparable {
    /// Orders by date (unknown dates first), then time of day.
    public static func < (lhs: GNSSTime, rhs: GNSSTime) -> Bool {
        if lhs.day != rhs.day {
            guard let l = lhs.day else { return true }
            guard let r = rhs.day else { return false }
            return l < r
        }
        return lhs.nanosecondOfDay < rhs.nanosecondOfDay
    }
}

extension GNSSTime: CustomStringConvertible {
    public var description: String { iso8601 }
}

extension GNSSTime {
    /// A dated time from nanoseconds since 1970.
    public init(nanosecondsSince1970 n: Int64, fractionDigits: UInt8) {
        var day = n / GNSSTime.nanosecondsPerDay
        var rest = n % GNSSTime.nanosecondsPerDay
        if rest < 0 {
            day -= 1
            rest += GNSSTime.nanosecondsPerDay
        }
        self.init(day: Int32(day), nanosecondOfDay: rest, fractionDigits: fractionDigits)
    }
}
