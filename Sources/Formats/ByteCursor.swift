import Geo

/// Writes bytes into memory the caller sized, with no capacity check per byte: a line is built
/// in a stack buffer through a cursor, then appended to the output once
/// (``ByteWriting/appendLine(capacity:to:_:)``). `Array.append` per field (a uniqueness and a
/// capacity check, a generic copy) cost more than the decoder itself for `decode`'s JSON Lines.
public struct ByteCursor {
    @usableFromInline var p: UnsafeMutablePointer<UInt8>

    @inlinable init(_ p: UnsafeMutablePointer<UInt8>) { self.p = p }

    @inlinable @inline(__always)
    public mutating func byte(_ b: UInt8) {
        p.pointee = b
        p += 1
    }

    @inlinable @inline(__always)
    public mutating func text(_ s: StaticString) {
        p.update(from: s.utf8Start, count: s.utf8CodeUnitCount)
        p += s.utf8CodeUnitCount
    }

    /// A string that needs no escaping (a name of ours), at most as long as the caller allowed for.
    @inlinable
    public mutating func plain(_ s: String) {
        var s = s
        s.withUTF8 { bytes in
            p.update(from: bytes.baseAddress!, count: bytes.count)
            p += bytes.count
        }
    }

    /// The number of decimal digits of `v` (1 for 0).
    @inlinable @inline(__always)
    static func digitCount(_ v: UInt64) -> Int {
        var n = 1
        var x = v
        while x >= 100 {
            x /= 100
            n += 2
        }
        return x >= 10 ? n + 1 : n
    }

    @inlinable @inline(__always)
    public mutating func int(_ value: Int64) {
        if value < 0 { byte(UInt8(ascii: "-")) }
        let v = value.magnitude
        let n = Self.digitCount(v)
        _ = ByteWriting.writeDigits(v, endingAt: p + n)
        p += n
    }

    /// `value` with exactly `decimals` (0...9) digits after the point, as
    /// ``ByteWriting/appendFixed(_:decimals:nullText:to:)`` writes it. Inlined so that a constant
    /// `decimals` makes the scale and the fraction's digit pairs constants (no division by a variable).
    @inlinable @inline(__always)
    public mutating func fixed(_ value: Double, decimals: Int, null: StaticString = "null") {
        // Not finite or too large: the comparison is false for NaN and infinities too.
        guard let scaled = ByteWriting.scaledMagnitude(value, decimals: decimals) else {
            text(null)
            return
        }
        if value < 0 && scaled != 0 { byte(UInt8(ascii: "-")) }
        if decimals == 0 {
            let n = Self.digitCount(scaled)
            _ = ByteWriting.writeDigits(scaled, endingAt: p + n)
            p += n
            return
        }
        let unit: UInt64 = ByteWriting.power(decimals)
        let whole = scaled / unit
        var fraction = scaled &- whole &* unit
        let n = Self.digitCount(whole)
        _ = ByteWriting.writeDigits(whole, endingAt: p + n)
        p += n
        p.pointee = UInt8(ascii: ".")
        // Exactly `decimals` digits, zeros included, two per step from the end.
        let pairs = ByteWriting.digitPairs.utf8Start
        var q = p + 1 + decimals
        var left = decimals
        while left >= 2 {
            let next = fraction / 100
            let r = Int(truncatingIfNeeded: fraction &- next &* 100) &* 2
            q -= 2
            q[0] = pairs[r]
            q[1] = pairs[r &+ 1]
            fraction = next
            left &-= 2
        }
        if left == 1 { q[-1] = UInt8(truncatingIfNeeded: fraction) &+ 48 }
        p += 1 + decimals
    }

    /// ``fixed(_:decimals:null:)`` with 2, 3 or 9 decimals folded in as constants, `null` for `nil`
    /// (the JSON writer's columns: one small function each rather than eleven inlined copies).
    @inlinable
    public mutating func fixed2(_ value: Double?) {
        if let value { fixed(value, decimals: 2) } else { text("null") }
    }

    @inlinable
    public mutating func fixed3(_ value: Double?) {
        if let value { fixed(value, decimals: 3) } else { text("null") }
    }

    @inlinable
    public mutating func fixed9(_ value: Double?) {
        if let value { fixed(value, decimals: 9) } else { text("null") }
    }

    @inlinable @inline(__always)
    public mutating func fixed(_ value: Double?, decimals: Int, null: StaticString = "null") {
        if let value { fixed(value, decimals: decimals, null: null) } else { text(null) }
    }

    @inlinable @inline(__always)
    public mutating func int(_ value: Int?, null: StaticString = "null") {
        if let value { int(Int64(value)) } else { text(null) }
    }

    /// Two digits of `v` (0...99) from the pairs table.
    @inlinable @inline(__always)
    mutating func two(_ v: Int) {
        let pairs = ByteWriting.digitPairs.utf8Start
        p[0] = pairs[v &* 2]
        p[1] = pairs[v &* 2 &+ 1]
        p += 2
    }

    /// The time as ``GNSSTime/appendISO8601(to:)`` writes it.
    @inlinable
    public mutating func iso8601(_ t: GNSSTime) {
        if let day = t.day { date(day) }
        timeOfDay(t)
    }

    /// `YYYY-MM-DDT` of a day number, copied from `last` when it is the day written last time (a
    /// log's fixes share a date for a whole day), else written and kept there.
    @inlinable @inline(__always)
    public mutating func date(_ day: Int32, reusing last: inout DateText) {
        if last.day == day {
            UnsafeMutableRawPointer(p).storeBytes(of: last.bytes.0, as: UInt64.self)
            UnsafeMutableRawPointer(p + 8).storeBytes(of: last.bytes.1, as: UInt64.self)
            p += last.count
            return
        }
        let start = p
        date(day)
        last.count = p - start
        // Years beyond 9999 are longer than the 16 bytes kept: not kept.
        guard last.count <= 16 else {
            last.day = nil
            return
        }
        last.day = day
        last.bytes.0 = UnsafeRawPointer(start).loadUnaligned(as: UInt64.self)
        last.bytes.1 = UnsafeRawPointer(start + 8).loadUnaligned(as: UInt64.self)
    }

    /// `YYYY-MM-DDT` of a day number (days since 1970).
    @inlinable
    public mutating func date(_ day: Int32) {
        let (y, m, d) = GNSSTime.civilFromDays(Int(day))
        if y < 0 || y > 9999 {
            int(Int64(y))
        } else {
            two(y / 100)
            two(y % 100)
        }
        byte(UInt8(ascii: "-"))
        two(m)
        byte(UInt8(ascii: "-"))
        two(d)
        byte(UInt8(ascii: "T"))
    }

    /// `hh:mm:ss[.f…]Z` of a time, keeping its fractional digits.
    @inlinable @inline(__always)
    public mutating func timeOfDay(_ t: GNSSTime) {
        let secondsOfDay = Int(t.nanosecondOfDay / 1_000_000_000)
        let nanos = Int(t.nanosecondOfDay &- Int64(secondsOfDay) &* 1_000_000_000)
        let minutes = secondsOfDay / 60
        two(Swift.min(secondsOfDay / 3600, 99))
        byte(UInt8(ascii: ":"))
        two(minutes % 60)
        byte(UInt8(ascii: ":"))
        // A leap second (23:59:60) keeps its 60.
        two(secondsOfDay >= 86_400 ? 60 : secondsOfDay &- minutes &* 60)
        if t.fractionDigits > 0 {
            let digits = Swift.min(Int(t.fractionDigits), 9)
            byte(UInt8(ascii: "."))
            // The leading `digits` digits of the nine, written from the end.
            var v = UInt64(nanos) / ByteWriting.power(9 &- digits)
            var q = p + digits
            while q > p {
                let next = v / 10
                q -= 1
                q.pointee = UInt8(truncatingIfNeeded: v &- next &* 10) &+ 48
                v = next
            }
            p += digits
        }
        byte(UInt8(ascii: "Z"))
    }
}

/// The date text a ``ByteCursor`` wrote last (`YYYY-MM-DDT`) and its day, for
/// ``ByteCursor/date(_:reusing:)``.
public struct DateText: Sendable {
    @usableFromInline var day: Int32?
    @usableFromInline var bytes: (UInt64, UInt64) = (0, 0)
    @usableFromInline var count = 0

    public init() {}
}

extension ByteWriting {
    /// Appends what `body` writes, at most `capacity` bytes (the caller's bound on what it writes),
    /// straight into the array's storage (grown first when it lacks `capacity` spare bytes).
    @inlinable
    public static func appendLine(capacity: Int, to out: inout [UInt8], _ body: (inout ByteCursor) -> Void) {
        out.append(addingCapacity: capacity) { span in
            span.withUnsafeMutableBufferPointer { buffer, initialized in
                let start = buffer.baseAddress! + initialized
                var cursor = ByteCursor(start)
                body(&cursor)
                let count = cursor.p - start
                precondition(count <= capacity, "ByteWriting.appendLine: wrote \(count) bytes into \(capacity)")
                initialized += count
            }
        }
    }
}
