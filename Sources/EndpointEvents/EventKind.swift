/// What happened to a device: the kinds of ``DeviceEvent`` (docs/events.md lists their fields).
///
/// Three sources: the endpoint's own evaluation of what it stores (geofences, overspeed, battery),
/// its stops detector and offline watch, and the device's own region and visit records as it
/// uploaded them.
public enum EventKind: String, Hashable, Sendable, CaseIterable, Codable, Comparable {
    /// The device entered one of the endpoint's geofences (`RegionMonitor`'s rules, evaluated on the
    /// stored locations).
    case geofenceEnter
    /// The device left one of the endpoint's geofences.
    case geofenceExit
    /// The device stayed inside a geofence for its `dwell` seconds.
    case geofenceDwell
    /// The endpoint's stop detector found the device stopped (an arrival confirmed).
    case stopStart
    /// The device left a stop (its departure confirmed).
    case stopEnd
    /// A trip between two stops ended (the arrival at the second).
    case tripEnd
    /// Nothing of the device arrived for the offline delay.
    case offline
    /// The device sent again after it was declared offline.
    case online
    /// The device went faster than its limit (one event per episode).
    case overspeed
    /// The device's battery fell to its threshold (one event until it charges again).
    case lowBattery
    /// The device says it entered one of its own regions (an uploaded `enter` record, OwnTracks'
    /// `transition`).
    case regionEnter
    /// The device says it left one of its own regions.
    case regionExit
    /// The device says it dwelt in one of its own regions.
    case regionDwell
    /// The device says it arrived somewhere (an uploaded visit record without a departure).
    case visitStart
    /// The device says it left a visit (a visit record with its departure).
    case visitEnd
    /// The device reports a trip it finished (an uploaded trip record).
    case deviceTrip

    /// Whether events of this kind name one of the endpoint's geofences.
    public var isGeofence: Bool { self == .geofenceEnter || self == .geofenceExit || self == .geofenceDwell }

    /// Whether events of this kind name one of the device's own regions.
    public var isDeviceRegion: Bool { self == .regionEnter || self == .regionExit || self == .regionDwell }

    /// In declaration order.
    public static func < (a: Self, b: Self) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// The kind named `name` (its raw value), or `nil`.
    public init?(name: String) { self.init(rawValue: name) }
}
