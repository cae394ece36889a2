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
    /// ``ByteWriting/appendFixed(_:decimals:nullText:to:)`` writes it.
    @inlinable
    public mutating func fixed(_ value: Double, decimals: Int, null: StaticString = "null") {
        let scale = ByteWriting.scale(decimals)
        guard value.isFinite, abs(value) * scale < 9.0e18 else {
            text(null)
            return
        }
        let scaled = UInt64((abs(value) * scale).rounded())
        if value < 0 && scaled != 0 { byte(UInt8(ascii: "-")) }
        // At least one digit before the point: zero padding up to decimals + 1 digits.
        let n = Swift.max(Self.digitCount(scaled), decimals + 1)
        let end = p + n
        let start = ByteWriting.writeDigits(scaled, endingAt: end)
        while p < start {
            p.pointee = 48
            p += 1
        }
        p = end
        if decimals > 0 {
            // Shift the fraction one place right and put the point before it.
            var i = 0
            while i < decimals {
                p[-i] = p[-i - 1]
                i += 1
            }
            p[-decimals] = UInt8(ascii: ".")
            p += 1
        }
    }

    @inlinable @inline(__always)
    public mutating func fixed(_ value: Double?, decimals: Int, null: StaticString = "null") {
        if let value { fixed(value, decimals: decimals, null: null) } else { text(null) }
    }

    @inlinable @inline(__always)
    public mutating func int(_ value: Int?, null: StaticString = "null") {
        if let value { int(Int64(value)) } else { text(null) }
    }

    @inlinable @inline(__always)
    mutating func two(_ v: Int) {
        byte(UInt8(truncatingIfNeeded: v / 10) &+ 48)
        byte(UInt8(truncatingIfNeeded: v % 10) &+ 48)
    }

    /// The time as ``GNSSTime/appendISO8601(to:)`` writes it.
    @inlinable
    public mutating func iso8601(_ t: GNSSTime) {
        if let day = t.day {
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
        let secondsOfDay = Int(t.nanosecondOfDay / 1_000_000_000)
        let nanos = Int(t.nanosecondOfDay % 1_000_000_000)
        two(Swift.min(secondsOfDay / 3600, 99))
        byte(UInt8(ascii: ":"))
        two(secondsOfDay / 60 % 60)
        byte(UInt8(ascii: ":"))
        // A leap second (23:59:60) keeps its 60.
        two(secondsOfDay >= 86_400 ? 60 : secondsOfDay % 60)
        if t.fractionDigits > 0 {
            byte(UInt8(ascii: "."))
            var divisor = 100_000_000
            for _ in 0..<Swift.min(Int(t.fractionDigits), 9) {
                byte(UInt8(truncatingIfNeeded: nanos / divisor % 10) &+ 48)
                divisor /= 10
            }
        }
        byte(UInt8(ascii: "Z"))
    }
}

extension ByteWriting {
    /// Appends what `body` writes, at most `capacity` bytes (the caller's bound on what it writes),
    /// with one append: the bytes are built in a stack buffer.
    @inlinable
    public static func appendLine(capacity: Int, to out: inout [UInt8], _ body: (inout ByteCursor) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var cursor = ByteCursor(buffer.baseAddress!)
            body(&cursor)
            let count = cursor.p - buffer.baseAddress!
            precondition(count <= capacity, "ByteWriting.appendLine: wrote \(count) bytes into \(capacity)")
            out.append(contentsOf: UnsafeBufferPointer(start: buffer.baseAddress!, count: count))
        }
    }
}
