import Geo

/// GeoJSON and Google Takeout location history, streamed.
///
/// - Google Takeout `Records.json` (and the older `Location History.json`): the objects of the
///   top-level `locations` array with `latitudeE7`/`longitudeE7`, `timestamp` (ISO 8601) or
///   `timestampMs`, `accuracy`, `verticalAccuracy`, `altitude`, `velocity` (m/s), `heading`.
/// - GeoJSON: a FeatureCollection, a Feature or a bare geometry; the features of `features`, and
///   those of a top-level `locations` array (Overland's batches). Each position of a Point,
///   MultiPoint, LineString or MultiLineString pairs with the time of the same index in the
///   feature's `coordTimes`, `times` or `coordinateProperties.times` (nested per line or flat,
///   ISO 8601 or epoch numbers); a feature with one position may give its time as a `time`,
///   `timestamp`, `datetime` or `when` property instead, and `altitude`/`ele`, `speed`,
///   `course`/`heading`/`bearing`, `accuracy`/`horizontal_accuracy`, `vertical_accuracy`.
///
/// Memory: a feature's positions are kept only until their times are read (or the reverse, when
/// the times come first), at most ``maxPending`` of them; nothing else grows with the file.
public struct JSONTrackReader: TrackReader {
    /// The most positions (or times) a feature may hold back waiting for their partners.
    public static let maxPending = 4_000_000

    var tokenizer = JSONTokenizer()
    var consumer: Consumer

    /// - Parameter format: the format the sniffer found (``TrackFileFormat/geojson`` or
    ///   ``TrackFileFormat/takeout``), for messages; the reader takes both.
    public init(format: TrackFileFormat = .geojson) {
        consumer = Consumer(format: format)
    }

    public var position: TrackFilePosition { tokenizer.position }
    public var statistics: TrackFileStatistics { consumer.statistics }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(TrackFileError) {
        try TrackFileError.reading(consumer.format) { () throws(TrackFileError) in
            try tokenizer.feed(bytes, &consumer, emit)
        }
    }

    public mutating func finish(_ emit: (Fix) -> Void) throws(TrackFileError) {
        try TrackFileError.reading(consumer.format) { () throws(TrackFileError) in try tokenizer.finish(&consumer, emit)
        }
    }

    struct Consumer: JSONConsumer {
        enum Key: UInt8 {
            case other, features, locations, geometry, properties, coordinates, times, coordinateProperties
            case latitudeE7, longitudeE7, timestamp, timestampMs, accuracy, verticalAccuracy, altitude, velocity
            case heading, time, speed, course, type
        }

        var format: TrackFileFormat
        var statistics = TrackFileStatistics()
        /// The last key read and the depth of its value.
        var key = Key.other
        var keyDepth = -1
        /// Depth of the values of the array holding features or records (`features`, `locations`): 2.
        var listDepth = 0
        /// The object being read as a feature or a record: the depth of its members, 0 for none.
        var recordDepth = 0
        var geometryDepth = 0
        var propertiesDepth = 0
        var coordinatePropertiesDepth = 0
        var coordinatesDepth = 0
        var timesDepth = 0
        var record = PointFields()
        var latitudeE7: Double?
        var longitudeE7: Double?
        var timestampMs: GNSSTime?
        /// The numbers of the innermost array in `coordinates`, and whether it held anything else.
        var numbers: (Double, Double, Double) = (0, 0, 0)
        var numberCount = 0
        var pureNumbers = true
        /// Positions waiting for their times, and times waiting for their positions.
        var positions: [(latitude: Double, longitude: Double, altitude: Double?, line: Int)] = []
        var positionsHead = 0
        var times: [GNSSTime] = []
        var timesHead = 0
        var sawTimes = false
        /// Whether the geometry's type is one of points or lines (not a polygon): `nil` until read.
        var isTrackGeometry: Bool?
        var positionCount = 0

        init(format: TrackFileFormat) { self.format = format }

        static func classify(_ b: UnsafeRawBufferPointer) -> Key {
            func eq(_ s: StaticString) -> Bool {
                b.count == s.utf8CodeUnitCount
                    && b.elementsEqual(UnsafeRawBufferPointer(start: s.utf8Start, count: b.count))
            }
            switch b.count {
            case 3:
                if eq("ele") { return .altitude }
                if eq("acc") { return .accuracy }
            case 4:
                if eq("time") { return .time }
                if eq("when") { return .time }
                if eq("type") { return .type }
            case 5:
                if eq("times") { return .times }
                if eq("speed") { return .speed }
            case 6: if eq("course") { return .course }
            case 7:
                if eq("heading") { return .heading }
                if eq("bearing") { return .heading }
            case 8:
                if eq("features") { return .features }
                if eq("geometry") { return .geometry }
                if eq("altitude") { return .altitude }
                if eq("accuracy") { return .accuracy }
                if eq("velocity") { return .velocity }
                if eq("datetime") { return .time }
            case 9:
                if eq("locations") { return .locations }
                if eq("timestamp") { return .timestamp }
                if eq("elevation") { return .altitude }
            case 10:
                if eq("properties") { return .properties }
                if eq("coordTimes") { return .times }
                if eq("latitudeE7") { return .latitudeE7 }
            case 11:
                if eq("coordinates") { return .coordinates }
                if eq("longitudeE7") { return .longitudeE7 }
                if eq("timestampMs") { return .timestampMs }
            case 16: if eq("verticalAccuracy") { return .verticalAccuracy }
            case 17: if eq("vertical_accuracy") { return .verticalAccuracy }
            case 19: if eq("horizontal_accuracy") { return .accuracy }
            case 20: if eq("coordinateProperties") { return .coordinateProperties }
            default: break
            }
            return .other
        }

        mutating func key(_ bytes: UnsafeRawBufferPointer, depth: Int) {
            // Only keys where records, features and their parts can be are looked at.
            if depth == 1 || depth == recordDepth || depth == geometryDepth || depth == propertiesDepth
                || depth == coordinatePropertiesDepth
            {
                key = Self.classify(bytes)
                keyDepth = depth
            } else {
                key = .other
                keyDepth = -1
            }
        }

        /// The key whose value starts at `depth`, consumed.
        mutating func keyFor(_ depth: Int) -> Key {
            guard keyDepth == depth else { return .other }
            keyDepth = -1
            return key
        }

        mutating func startRecord(_ depth: Int) {
            recordDepth = depth
            record = PointFields()
            latitudeE7 = nil
            longitudeE7 = nil
            timestampMs = nil
            positions.removeAll(keepingCapacity: true)
            positionsHead = 0
            times.removeAll(keepingCapacity: true)
            timesHead = 0
            sawTimes = false
            isTrackGeometry = nil
            positionCount = 0
        }

        mutating func begin(object: Bool, depth: Int) throws(TrackFileError) {
            let k = keyFor(depth)
            if coordinatesDepth > 0 && depth >= coordinatesDepth {
                // A container inside `coordinates`: an array may be a position.
                pureNumbers = !object
                numberCount = 0
                return
            }
            if depth == 0 {
                if object { startRecord(1) }
                return
            }
            if depth == 1 && !object && (k == .features || k == .locations) {
                listDepth = 2
                return
            }
            if object && depth == listDepth && listDepth > 0 {
                startRecord(depth + 1)
                return
            }
            guard recordDepth > 0 else { return }
            if object && depth == recordDepth && k == .geometry {
                geometryDepth = depth + 1
            } else if object && depth == recordDepth && k == .properties {
                propertiesDepth = depth + 1
            } else if object && depth == propertiesDepth && k == .coordinateProperties {
                coordinatePropertiesDepth = depth + 1
            } else if !object && k == .coordinates && (depth == geometryDepth || depth == recordDepth) {
                coordinatesDepth = depth + 1
                numberCount = 0
                pureNumbers = true
            } else if !object && k == .times && (depth == propertiesDepth || depth == coordinatePropertiesDepth) {
                timesDepth = depth + 1
                sawTimes = true
            }
        }

        mutating func end(object: Bool, depth: Int, _ emit: (Fix) -> Void) throws(TrackFileError) {
            if coordinatesDepth > 0 && depth + 1 >= coordinatesDepth && !object {
                // The innermost array of numbers just closed: a position.
                if pureNumbers && numberCount >= 2 {
                    try position(emit)
                }
                numberCount = 0
                pureNumbers = false
                if depth + 1 == coordinatesDepth { coordinatesDepth = 0 }
                return
            }
            if depth + 1 == timesDepth && !object {
                timesDepth = 0
                return
            }
            if object && depth + 1 == coordinatePropertiesDepth { coordinatePropertiesDepth = 0 }
            if object && depth + 1 == propertiesDepth { propertiesDepth = 0 }
            if object && depth + 1 == geometryDepth { geometryDepth = 0 }
            if object && depth + 1 == recordDepth {
                try endRecord(emit)
                recordDepth = 0
            }
            if !object && depth + 1 == listDepth { listDepth = 0 }
        }

        mutating func scalar(
            _ kind: JSONScalar, _ bytes: UnsafeRawBufferPointer, depth: Int, _ emit: (Fix) -> Void
        ) throws(TrackFileError) {
            let k = keyFor(depth)
            if coordinatesDepth > 0 && depth >= coordinatesDepth {
                guard kind == .number, let v = NumberText.double(bytes) else {
                    pureNumbers = false
                    return
                }
                switch numberCount {
                case 0: numbers.0 = v
                case 1: numbers.1 = v
                case 2: numbers.2 = v
                default: break
                }
                numberCount += 1
                return
            }
            if timesDepth > 0 && depth >= timesDepth {
                guard let t = time(kind, bytes) else {
                    throw TrackFileError(.invalidValue, "a time in a times array that is not ISO 8601 or epoch seconds")
                }
                try addTime(t, emit)
                return
            }
            guard recordDepth > 0, k != .other, kind != .null else { return }
            if k == .type && (depth == geometryDepth || depth == recordDepth) && kind == .string {
                let types: [StaticString] = ["Point", "MultiPoint", "LineString", "MultiLineString"]
                let isTrack = types.contains { s in
                    bytes.elementsEqual(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
                }
                // A feature's own "type" is "Feature": only a geometry's type counts.
                if depth == geometryDepth || isTrack
                    || isTrackGeometry == nil && !bytes.elementsEqual("Feature".utf8)
                        && !bytes.elementsEqual("FeatureCollection".utf8)
                {
                    isTrackGeometry = isTrack
                }
                return
            }
            let number = kind == .number ? NumberText.double(bytes) : kind == .string ? NumberText.double(bytes) : nil
            if depth == recordDepth {
                switch k {
                case .latitudeE7: latitudeE7 = number
                case .longitudeE7: longitudeE7 = number
                case .timestampMs:
                    timestampMs = TimeText.epoch(bytes)
                    guard timestampMs != nil else {
                        throw TrackFileError(.invalidValue, "a 'timestampMs' that is not a number of milliseconds")
                    }
                case .timestamp:
                    guard let t = time(kind, bytes) else {
                        throw TrackFileError(.invalidValue, "a 'timestamp' that is not an ISO 8601 time")
                    }
                    record.time = t
                case .accuracy: record.horizontalAccuracy = number
                case .verticalAccuracy: record.verticalAccuracy = number
                case .altitude: record.altitude = number
                case .velocity: record.speed = number
                case .heading: record.course = number
                default: break
                }
            } else if depth == propertiesDepth {
                switch k {
                case .time, .timestamp:
                    guard let t = time(kind, bytes) else {
                        throw TrackFileError(.invalidValue, "a time property that is not ISO 8601 or epoch seconds")
                    }
                    record.time = t
                case .accuracy: record.horizontalAccuracy = number
                case .verticalAccuracy: record.verticalAccuracy = number
                case .altitude: record.altitude = number
                case .speed, .velocity: record.speed = number
                case .course, .heading: record.course = number
                default: break
                }
            }
        }

        func time(_ kind: JSONScalar, _ bytes: UnsafeRawBufferPointer) -> GNSSTime? {
            switch kind {
            case .string: TimeText.any(bytes)
            case .number: TimeText.epoch(bytes)
            default: nil
            }
        }

        mutating func position(_ emit: (Fix) -> Void) throws(TrackFileError) {
            let p = (latitude: numbers.1, longitude: numbers.0, altitude: numberCount >= 3 ? numbers.2 : nil, line: 0)
            positionCount += 1
            if timesHead < times.count {
                let t = times[timesHead]
                timesHead += 1
                try emitPair(p, t, emit)
                return
            }
            guard positions.count - positionsHead < JSONTrackReader.maxPending else {
                throw TrackFileError(
                    .tooLarge, "a feature with more than \(JSONTrackReader.maxPending) positions before its times")
            }
            positions.append(p)
        }

        mutating func addTime(_ t: GNSSTime, _ emit: (Fix) -> Void) throws(TrackFileError) {
            if positionsHead < positions.count {
                let p = positions[positionsHead]
                positionsHead += 1
                try emitPair(p, t, emit)
                return
            }
            guard times.count - timesHead < JSONTrackReader.maxPending else {
                throw TrackFileError(
                    .tooLarge, "a feature with more than \(JSONTrackReader.maxPending) times before its positions")
            }
            times.append(t)
        }

        mutating func emitPair(
            _ p: (latitude: Double, longitude: Double, altitude: Double?, line: Int), _ t: GNSSTime,
            _ emit: (Fix) -> Void
        ) throws(TrackFileError) {
            var fields = PointFields()
            fields.latitude = p.latitude
            fields.longitude = p.longitude
            fields.altitude = p.altitude
            fields.time = t
            try deliver(fields, emit)
        }

        mutating func deliver(_ fields: PointFields, _ emit: (Fix) -> Void) throws(TrackFileError) {
            try fields.deliver(lastLine: 0, to: &statistics, emit) { TrackFileError(.invalidValue, $0) }
        }

        mutating func endRecord(_ emit: (Fix) -> Void) throws(TrackFileError) {
            if let latitudeE7, let longitudeE7 {
                // Takeout: values past ±90° / ±180° are 32-bit overflows of negative ones (a known export bug).
                var lat = latitudeE7
                var lon = longitudeE7
                if lat > 900_000_000 { lat -= 4_294_967_296 }
                if lon > 1_800_000_000 { lon -= 4_294_967_296 }
                var fields = record
                fields.latitude = lat / 1e7
                fields.longitude = lon / 1e7
                if fields.time == nil { fields.time = timestampMs }
                try deliver(fields, emit)
                return
            }
            // Positions left without times: a single one takes the feature's time property.
            let left = positions.count - positionsHead
            if isTrackGeometry == false {
                statistics.otherRecords += 1
            } else if left == 1 && positionCount == 1 && !sawTimes {
                let p = positions[positionsHead]
                var fields = record
                fields.latitude = p.latitude
                fields.longitude = p.longitude
                if fields.altitude == nil { fields.altitude = p.altitude }
                try deliver(fields, emit)
            } else if left > 0 {
                statistics.untimed += left
            }
            if positionCount == 0 && recordDepth > 1 && isTrackGeometry != false { statistics.otherRecords += 1 }
            positions.removeAll(keepingCapacity: true)
            positionsHead = 0
            times.removeAll(keepingCapacity: true)
            timesHead = 0
        }
    }
}
