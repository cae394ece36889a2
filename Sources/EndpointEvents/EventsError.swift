/// EndpointEvents' error: a geofence document, a geofence or a saved evaluation state that cannot be
/// used; what was wrong (``code``, ``message``) and where (``feature``, ``geofence``,
/// ``byteOffset``), with the cause kept (``underlying``).
///
/// It never holds a coordinate: a vertex is named by its number, a feature by its position and id.
public struct EventsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The document is not a GeoJSON FeatureCollection or Feature of regions (``EventsError/byteOffset``
        /// says where, when known; ``EventsError/underlying`` is the reader's `FormatsError`).
        public static let invalidDocument = Code(rawValue: "invalid-document")
        /// The document is past a bound of ``GeofenceDocument/Limits`` (bytes, geofences, vertices,
        /// devices): an HTTP server answers it 413.
        public static let tooLarge = Code(rawValue: "too-large")
        /// Geofences that cannot be evaluated (``EventsError/failures``, one per geofence, each naming
        /// its feature and id): nothing of the document is taken.
        public static let invalidGeofences = Code(rawValue: "invalid-geofences")
        /// One geofence that cannot be evaluated: its shape (``EventsError/underlying`` is the
        /// `LocationError`, with the `GeoError` of a ring that is no polygon), its id or its devices.
        public static let invalidGeofence = Code(rawValue: "invalid-geofence")
        /// A saved evaluation state that does not read back (``EventsError/underlying``).
        public static let invalidState = Code(rawValue: "invalid-state")
    }

    public var code: Code
    /// What was wrong, in words, without the place (``description`` adds it).
    public var message: String
    /// The 1-based feature of the document, when the problem is one feature's.
    public var feature: Int?
    /// The geofence's id, when known.
    public var geofence: String?
    /// The 0-based byte offset in the document, when known.
    public var byteOffset: Int?
    /// The geofences that are invalid, for ``Code/invalidGeofences``.
    public var failures: [EventsError] = []
    /// The error this one comes from.
    public var underlying: (any Error)?

    public init(
        _ code: Code, _ message: String = "", feature: Int? = nil, geofence: String? = nil, byteOffset: Int? = nil,
        failures: [EventsError] = [], underlying: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.feature = feature
        self.geofence = geofence
        self.byteOffset = byteOffset
        self.failures = failures
        self.underlying = underlying
    }

    /// Equal when they say the same thing about the same place (the cause by its description).
    public static func == (a: Self, b: Self) -> Bool {
        a.code == b.code && a.message == b.message && a.feature == b.feature && a.geofence == b.geofence
            && a.byteOffset == b.byteOffset && a.failures == b.failures
            && a.underlying.map { "\($0)" } == b.underlying.map { "\($0)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(feature)
        hasher.combine(geofence)
    }

    /// Where: `feature 3 (depot)`, or nothing.
    var place: String {
        switch (feature, geofence) {
        case (let f?, let g?): "feature \(f) (\(g))"
        case (let f?, nil): "feature \(f)"
        case (nil, let g?): "geofence \(g)"
        case (nil, nil): ""
        }
    }

    public var description: String {
        switch code {
        case .invalidGeofences:
            let shown = failures.prefix(20).map(\.description).joined(separator: "; ")
            let more = failures.count > 20 ? "; and \(failures.count - 20) more" : ""
            return
                "\(failures.count) invalid geofence\(failures.count == 1 ? "" : "s"): \(shown)\(more) (nothing stored)"
        default:
            // The message says the cause in its own words; the cause is kept for programs.
            let what = message.isEmpty ? underlying.map { "\($0)" } ?? code.rawValue : message
            let offset = byteOffset.map { " (at byte \($0))" } ?? ""
            return (place.isEmpty ? "" : "\(place): ") + what + offset
        }
    }
}
