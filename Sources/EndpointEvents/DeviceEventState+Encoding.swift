import LocationService

/// How a store keeps a device's state: a compact binary form, written and read with each batch.
///
/// A version byte (1), then the settled state (the geofences' generation and watches, the overspeed
/// and battery episodes, the last folded location's time and key), the window's locations and the
/// decisions reported for them. Numbers are exact (a double's 8 bytes, little-endian; counts and
/// generations as LEB128 varints), strings UTF-8 with their length. Foundation's JSON coder took
/// 300-500 µs a batch for the same state (events-bench); this takes a few.
extension DeviceEventState {
    static let encodingVersion: UInt8 = 1

    /// The state as a store keeps it.
    public func encoded() -> [UInt8] {
        var w = ByteWriter()
        w.byte(Self.encodingVersion)
        w.varint(settled.geofences.generation)
        w.varint(UInt64(settled.geofences.watches.count))
        for watched in settled.geofences.watches {
            w.string(watched.name)
            w.varint(watched.revision)
            w.varint(UInt64(UInt32(bitPattern: watched.slot)))
            let watch = watched.watch
            w.byte(Self.code(watch.state))
            w.byte(watch.pending.map(Self.code) ?? 0)
            w.double(watch.pendingSince)
            w.optional(watch.enteredAt)
            w.byte(watch.dwellReported ? 1 : 0)
        }
        w.byte(settled.overspeed.inEpisode ? 1 : 0)
        w.optional(settled.overspeed.aboveSince)
        w.byte(settled.battery.armed ? 1 : 0)
        w.optional(settled.time)
        w.optional(settled.key)
        w.varint(UInt64(window.count))
        for l in window {
            w.string(l.key)
            w.double(l.time)
            w.double(l.latitude)
            w.double(l.longitude)
            w.optional(l.accuracy)
            w.optional(l.speed)
            w.optional(l.battery)
        }
        w.varint(UInt64(reported.count))
        for r in reported {
            w.byte(UInt8(EventKind.allCases.firstIndex(of: r.kind)!))
            w.optional(r.subject)
            w.double(r.time)
            w.string(r.key)
        }
        return w.bytes
    }

    /// The state ``encoded()`` wrote.
    ///
    /// - Throws: ``EventsError`` (``EventsError/Code/invalidState``) for bytes it did not write.
    public init(encoded bytes: [UInt8]) throws(EventsError) {
        var r = ByteReader(bytes)
        guard let version = r.byte(), version == Self.encodingVersion else {
            throw EventsError(.invalidState, "a device's saved event state is of an unknown version")
        }
        var state = DeviceEventState()
        guard let generation = r.varint(), let watchCount = r.count() else { throw Self.unreadable }
        var watches: [GeofenceState.Watched] = []
        watches.reserveCapacity(watchCount)
        for _ in 0..<watchCount {
            guard let name = r.string(), let revision = r.varint(), let slot = r.varint(), slot <= UInt32.max,
                let stateCode = r.byte(), let state = Self.regionState(stateCode), let pendingCode = r.byte(),
                let pendingSince = r.double(), let enteredAt = r.optionalDouble(), let dwell = r.byte()
            else { throw Self.unreadable }
            let pending: RegionState?
            if pendingCode == 0 {
                pending = nil
            } else {
                guard let p = Self.regionState(pendingCode) else { throw Self.unreadable }
                pending = p
            }
            watches.append(
                GeofenceState.Watched(
                    name: name, revision: revision, slot: Int32(bitPattern: UInt32(slot)),
                    watch: RegionWatch(
                        state: state, pending: pending, pendingSince: pendingSince, enteredAt: enteredAt,
                        dwellReported: dwell != 0)))
        }
        state.settled.geofences = GeofenceState(generation: generation, watches: watches)
        guard let inEpisode = r.byte(), let aboveSince = r.optionalDouble(), let armed = r.byte(),
            let time = r.optionalDouble(), let key = r.optionalString(), let windowCount = r.count()
        else { throw Self.unreadable }
        state.settled.overspeed = OverspeedRule.State(inEpisode: inEpisode != 0, aboveSince: aboveSince)
        state.settled.battery = BatteryRule.State(armed: armed != 0)
        state.settled.time = time
        state.settled.key = key
        state.window.reserveCapacity(windowCount)
        for _ in 0..<windowCount {
            guard let key = r.string(), let time = r.double(), let lat = r.double(), let lon = r.double(),
                let accuracy = r.optionalDouble(), let speed = r.optionalDouble(), let battery = r.optionalDouble()
            else { throw Self.unreadable }
            state.window.append(
                Located(
                    key: key, time: time, latitude: lat, longitude: lon, accuracy: accuracy, speed: speed,
                    battery: battery))
        }
        guard let reportedCount = r.count() else { throw Self.unreadable }
        for _ in 0..<reportedCount {
            guard let kindIndex = r.byte(), Int(kindIndex) < EventKind.allCases.count, let subject = r.optionalString(),
                let time = r.double(), let key = r.string()
            else { throw Self.unreadable }
            state.reported.append(
                Reported(kind: EventKind.allCases[Int(kindIndex)], subject: subject, time: time, key: key))
        }
        guard r.atEnd else { throw Self.unreadable }
        self = state
    }

    static var unreadable: EventsError {
        EventsError(.invalidState, "a device's saved event state does not read back (cut short or not one)")
    }

    static func code(_ s: RegionState) -> UInt8 {
        switch s {
        case .inside: 1
        case .outside: 2
        case .unknown: 3
        }
    }

    static func regionState(_ code: UInt8) -> RegionState? {
        switch code {
        case 1: .inside
        case 2: .outside
        case 3: .unknown
        default: nil
        }
    }
}

/// Bytes written: varints, doubles, strings, optionals (a presence byte first).
struct ByteWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1024) }

    mutating func byte(_ b: UInt8) { bytes.append(b) }

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func double(_ d: Double) {
        var bits = d.bitPattern
        for _ in 0..<8 {
            bytes.append(UInt8(truncatingIfNeeded: bits))
            bits >>= 8
        }
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { u in
            varint(UInt64(u.count))
            bytes.append(contentsOf: u)
        }
    }

    mutating func optional(_ d: Double?) {
        guard let d else { return byte(0) }
        byte(1)
        double(d)
    }

    mutating func optional(_ s: String?) {
        guard let s else { return byte(0) }
        byte(1)
        string(s)
    }
}

/// Bytes read back; `nil` for anything cut short or out of its range.
struct ByteReader {
    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { i == bytes.count }

    mutating func byte() -> UInt8? {
        guard i < bytes.count else { return nil }
        defer { i += 1 }
        return bytes[i]
    }

    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while let b = byte() {
            guard shift < 64 else { return nil }
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// A count of items, each at least a byte: never more than the bytes left.
    mutating func count() -> Int? {
        guard let n = varint(), n <= UInt64(bytes.count - i) else { return nil }
        return Int(n)
    }

    mutating func double() -> Double? {
        guard i + 8 <= bytes.count else { return nil }
        var bits: UInt64 = 0
        for k in 0..<8 { bits |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
        i += 8
        return Double(bitPattern: bits)
    }

    mutating func string() -> String? {
        guard let n = count(), i + n <= bytes.count else { return nil }
        defer { i += n }
        return String(validating: bytes[i..<(i + n)], as: UTF8.self)
    }

    /// `.some(nil)` for an absent value, `nil` when unreadable.
    mutating func optionalDouble() -> Double?? {
        switch byte() {
        case 0: return .some(nil)
        case 1: return double().map { .some($0) }
        default: return nil
        }
    }

    mutating func optionalString() -> String?? {
        switch byte() {
        case 0: return .some(nil)
        case 1: return string().map { .some($0) }
        default: return nil
        }
    }
}
