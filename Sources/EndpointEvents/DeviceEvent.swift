import Formats
import Geo
import LocationService

/// A stored record with the key its store gave it (the TrackStore's `key(_:format:)`): what an
/// event's id is derived from, so that evaluating the same record again gives the same ids.
public struct KeyedRecord: Hashable, Sendable {
    public var key: String
    public var record: TrailRecord

    public init(key: String, record: TrailRecord) {
        self.key = key
        self.record = record
    }
}

/// Something that happened to a device, as the endpoint keeps, serves and delivers it: its stable
/// ``id``, the ``device``, the ``kind``, when (``time``, and ``decidedAt`` when it was decided
/// later), where (the position of the record that caused it, when there is one) and the kind's
/// fields (``details``). Its JSON (``json``) is what `/v1/events`, the live stream and a webhook
/// carry (docs/events.md).
public struct DeviceEvent: Hashable, Sendable {
    /// The kind's own fields.
    public enum Details: Hashable, Sendable {
        /// `online`: no more than the common fields.
        case none
        /// A geofence of the endpoint (`geofence*`).
        case geofence(String)
        /// A region of the device's own (`region*`).
        case region(String)
        /// A stop or a visit (`stopStart`, `stopEnd`, `visitStart`, `visitEnd`).
        case stay(Stay)
        /// A trip (`tripEnd`, `deviceTrip`).
        case trip(TripSpan)
        /// `offline`: when the device's last record arrived (the server's clock).
        case offline(lastSeen: Double)
        /// `overspeed`: the speed that broke the limit, and the limit, in m/s.
        case overspeed(speed: Double, limit: Double)
        /// `lowBattery`: the level that reached the threshold, and the threshold, in percent.
        case battery(level: Double, threshold: Double)
    }

    /// Where a device stayed: from `start` to `end` (`nil` while it is there), its centre is the
    /// event's position.
    public struct Stay: Hashable, Sendable {
        public var start: Double
        public var end: Double?
        /// The spread of its fixes, in metres, when known.
        public var radius: Double?
        /// How many fixes it took, when known.
        public var fixes: Int?

        public init(start: Double, end: Double?, radius: Double?, fixes: Int?) {
            self.start = start
            self.end = end
            self.radius = radius
            self.fixes = fixes
        }
    }

    /// A trip from its start to its end; the event's position is where it ended.
    public struct TripSpan: Hashable, Sendable {
        public var start: Double
        public var end: Double
        public var from: Coordinate
        public var to: Coordinate
        /// Metres along its fixes.
        public var distance: Double
        /// Its highest speed in m/s, when known.
        public var maximumSpeed: Double?

        public init(
            start: Double, end: Double, from: Coordinate, to: Coordinate, distance: Double, maximumSpeed: Double?
        ) {
            self.start = start
            self.end = end
            self.from = from
            self.to = to
            self.distance = distance
            self.maximumSpeed = maximumSpeed
        }
    }

    /// Stable: derived from the event's cause (``EventID``), the same however often it is evaluated.
    public var id: String
    public var device: String
    public var kind: EventKind
    /// When it happened, in seconds since 1970: the causing record's time (for a geofence
    /// transition, the time its evidence began, as the device's monitor reports it).
    public var time: Double
    /// When it was decided, when later than ``time`` (the record that confirmed a transition, the
    /// point that confirmed a stop).
    public var decidedAt: Double?
    /// Where, when the event has a place: the causing record's position (a stop's centre, a trip's
    /// end).
    public var latitude: Double?
    public var longitude: Double?
    public var details: Details

    public init(
        id: String, device: String, kind: EventKind, time: Double, decidedAt: Double? = nil, latitude: Double? = nil,
        longitude: Double? = nil, details: Details = .none
    ) {
        self.id = id
        self.device = device
        self.kind = kind
        self.time = time
        self.decidedAt = decidedAt
        self.latitude = latitude
        self.longitude = longitude
        self.details = details
    }

    /// The geofence or region the event names, if any.
    public var subject: String? {
        switch details {
        case .geofence(let name), .region(let name): name
        default: nil
        }
    }
}

// MARK: - Events from their causes

extension DeviceEvent {
    /// A geofence transition `kind` the monitor reported at `time` (when its evidence began), decided
    /// by `record`.
    public static func geofence(_ kind: EventKind, _ geofence: String, time: Double, decidedBy record: KeyedRecord)
        -> DeviceEvent
    {
        precondition(kind.isGeofence, "a geofence event is geofenceEnter, geofenceExit or geofenceDwell")
        let r = record.record
        return DeviceEvent(
            id: EventID.make(device: r.device, kind: kind, subject: geofence, cause: record.key), device: r.device,
            kind: kind, time: time, decidedAt: r.time > time ? r.time : nil, latitude: r.latitude,
            longitude: r.longitude, details: .geofence(geofence))
    }

    /// The event a record of the device's own says (a region transition, a visit, a trip), or `nil`
    /// for a location.
    public static func reported(by keyed: KeyedRecord) -> DeviceEvent? {
        let r = keyed.record
        let kind: EventKind
        let details: Details
        var latitude: Double? = r.latitude
        var longitude: Double? = r.longitude
        switch r.kind {
        case .location, .heartbeat:
            return nil
        case .enter, .exit, .dwell:
            kind = r.kind == .enter ? .regionEnter : r.kind == .exit ? .regionExit : .regionDwell
            details = .region(r.region ?? "")
            if !r.valid {
                // A transition without a position (OwnTracks may send one): no place.
                latitude = nil
                longitude = nil
            }
        case .visit:
            let end = r.span?.end
            kind = end == nil ? .visitStart : .visitEnd
            details = .stay(Stay(start: r.time, end: end, radius: r.horizontalAccuracy, fixes: nil))
        case .trip:
            let span = r.span ?? TrailRecord.Span()
            let to = Coordinate(latitude: span.endLatitude ?? r.latitude, longitude: span.endLongitude ?? r.longitude)
            kind = .deviceTrip
            details = .trip(
                TripSpan(
                    start: r.time, end: span.end ?? r.time,
                    from: Coordinate(latitude: r.latitude, longitude: r.longitude),
                    to: to, distance: span.distance ?? 0, maximumSpeed: span.maximumSpeed))
            latitude = to.latitude
            longitude = to.longitude
        }
        return DeviceEvent(
            id: EventID.make(device: r.device, kind: kind, subject: nil, cause: keyed.key), device: r.device,
            kind: kind, time: r.time, decidedAt: r.decidedAt.flatMap { $0 > r.time ? $0 : nil }, latitude: latitude,
            longitude: longitude, details: details)
    }

    /// `stopStart`: the stop detector confirmed an arrival (`visit`, without its departure) at the
    /// point of time `decided`. Its id is the stop's: the device and the arrival, so a detector run
    /// again over the same points (a late point's replay) finds the same event.
    public static func stopStart(device: String, visit: Visit, decided: Double) -> DeviceEvent {
        stay(.stopStart, device: device, visit: visit, decided: decided)
    }

    /// `stopEnd`: the stop detector confirmed the departure from `visit` at `decided`.
    public static func stopEnd(device: String, visit: Visit, decided: Double) -> DeviceEvent {
        stay(.stopEnd, device: device, visit: visit, decided: decided)
    }

    private static func stay(_ kind: EventKind, device: String, visit v: Visit, decided: Double) -> DeviceEvent {
        let time = kind == .stopStart ? v.arrival : v.departure ?? decided
        return DeviceEvent(
            id: EventID.make(device: device, kind: kind, subject: nil, cause: EventID.time(v.arrival)),
            device: device, kind: kind, time: time, decidedAt: decided > time ? decided : nil,
            latitude: v.coordinate.latitude, longitude: v.coordinate.longitude,
            details: .stay(
                Stay(
                    start: v.arrival, end: kind == .stopStart ? nil : v.departure, radius: v.horizontalAccuracy,
                    fixes: v.fixCount)))
    }

    /// `tripEnd`: the stop detector ended `trip` (an arrival) at `decided`; its id is the device and
    /// the trip's start.
    public static func tripEnd(device: String, trip t: Trip, decided: Double) -> DeviceEvent {
        DeviceEvent(
            id: EventID.make(device: device, kind: .tripEnd, subject: nil, cause: EventID.time(t.start)),
            device: device, kind: .tripEnd, time: t.end, decidedAt: decided > t.end ? decided : nil,
            latitude: t.endCoordinate.latitude, longitude: t.endCoordinate.longitude,
            details: .trip(
                TripSpan(
                    start: t.start, end: t.end, from: t.startCoordinate, to: t.endCoordinate, distance: t.distance,
                    maximumSpeed: t.maximumSpeed)))
    }

    /// `offline`: declared at `time` (the server's clock), the device's last record received at
    /// `lastSeen`. Its id is the device and `lastSeen`: every instance sharing a store, which reads
    /// the same last reception, declares the same event.
    public static func offline(device: String, time: Double, lastSeen: Double) -> DeviceEvent {
        DeviceEvent(
            id: EventID.make(device: device, kind: .offline, subject: nil, cause: EventID.time(lastSeen)),
            device: device, kind: .offline, time: time, details: .offline(lastSeen: lastSeen))
    }

    /// `online`: a record of the device arrived at `time` after it was declared offline with its
    /// last record received at `lastSeen` (the offline event's cause: one online per offline).
    public static func online(device: String, time: Double, lastSeen: Double) -> DeviceEvent {
        DeviceEvent(
            id: EventID.make(device: device, kind: .online, subject: nil, cause: EventID.time(lastSeen)),
            device: device, kind: .online, time: time)
    }

    /// `overspeed` at `record`'s time.
    static func overspeed(_ record: KeyedRecord, speed: Double, limit: Double) -> DeviceEvent {
        fromRecord(.overspeed, record, .overspeed(speed: speed, limit: limit))
    }

    /// `lowBattery` at `record`'s time.
    static func lowBattery(_ record: KeyedRecord, level: Double, threshold: Double) -> DeviceEvent {
        fromRecord(.lowBattery, record, .battery(level: level, threshold: threshold))
    }

    private static func fromRecord(_ kind: EventKind, _ keyed: KeyedRecord, _ details: Details) -> DeviceEvent {
        let r = keyed.record
        return DeviceEvent(
            id: EventID.make(device: r.device, kind: kind, subject: nil, cause: keyed.key), device: r.device,
            kind: kind, time: r.time, latitude: r.latitude, longitude: r.longitude, details: details)
    }
}
