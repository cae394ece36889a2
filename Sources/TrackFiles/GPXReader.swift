import Geo

/// GPX 1.0 and 1.1, streamed: track points, route points and waypoints that have a time, in
/// document order.
///
/// A point's `ele`, `time`, `hdop`, `vdop`, `pdop` and `sat` are read from its children; `speed`
/// (m/s) and `course` (degrees) from a child (GPX 1.0) or from any element of that local name in
/// its `extensions` (Garmin's `gpxtpx:speed`, OsmAnd's `speed`, GPX 1.1 readers' `course`).
/// A point without a time is counted in ``TrackFileStatistics/untimed`` and left out.
/// The XML is read by ``XMLTokenizer``: no DTD, no entities but the predefined ones.
public struct GPXReader: TrackReader {
    var tokenizer = XMLTokenizer()
    var consumer = Consumer()

    public init() {}

    public var position: TrackFilePosition { tokenizer.position }
    public var statistics: TrackFileStatistics { consumer.statistics }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(TrackFileError) {
        try TrackFileError.reading(.gpx) { () throws(TrackFileError) in try tokenizer.feed(bytes, &consumer, emit) }
    }

    public mutating func finish(_ emit: (Fix) -> Void) throws(TrackFileError) {
        try TrackFileError.reading(.gpx) { () throws(TrackFileError) in try tokenizer.finish() }
    }

    struct Consumer: XMLConsumer {
        enum Field: UInt8 {
            case none, ele, time, speed, course, hdop, vdop, pdop, sat
        }

        var statistics = TrackFileStatistics()
        var depth = 0
        /// The depth of the point being read (`trkpt`, `rtept`, `wpt`), 0 outside one.
        var pointDepth = 0
        var point = PointFields()
        var field = Field.none
        var fieldDepth = 0
        var text: [UInt8] = []
        var textOverflow = false

        init() { text.reserveCapacity(64) }

        static func equal(_ b: UnsafeRawBufferPointer, _ s: StaticString) -> Bool {
            b.count == s.utf8CodeUnitCount
                && b.elementsEqual(UnsafeRawBufferPointer(start: s.utf8Start, count: b.count))
        }

        mutating func start(
            _ name: UnsafeRawBufferPointer, _ attributes: XMLAttributes, line: Int
        ) throws(TrackFileError) {
            depth += 1
            if depth == 1 {
                guard Self.equal(name, "gpx") else {
                    throw TrackFileError(.missingField, "the root element is not 'gpx'", line: line)
                }
                if let v = attributes.value("version") { statistics.version = String(decoding: v, as: UTF8.self) }
                return
            }
            if pointDepth == 0 {
                guard Self.equal(name, "trkpt") || Self.equal(name, "rtept") || Self.equal(name, "wpt") else { return }
                pointDepth = depth
                point = PointFields()
                point.line = line
                guard let lat = attributes.value("lat"), let lon = attributes.value("lon") else {
                    throw TrackFileError(.missingField, "a point without a 'lat' or 'lon' attribute", line: line)
                }
                guard let latitude = NumberText.double(lat), let longitude = NumberText.double(lon) else {
                    throw TrackFileError(.invalidValue, "a 'lat' or 'lon' attribute that is not a number", line: line)
                }
                point.latitude = latitude
                point.longitude = longitude
                return
            }
            guard field == .none else { return }
            let child = depth == pointDepth + 1
            let f: Field =
                if child && Self.equal(name, "ele") { .ele } else if child && Self.equal(name, "time") {
                    .time
                } else if Self.equal(name, "speed") { .speed } else if Self.equal(name, "course") {
                    .course
                } else if child && Self.equal(name, "hdop") { .hdop } else if child && Self.equal(name, "vdop") {
                    .vdop
                } else if child && Self.equal(name, "pdop") { .pdop } else if child && Self.equal(name, "sat") {
                    .sat
                } else { .none }
            if f != .none {
                field = f
                fieldDepth = depth
                text.removeAll(keepingCapacity: true)
                textOverflow = false
            }
        }

        mutating func text(_ bytes: UnsafeRawBufferPointer) {
            guard field != .none else { return }
            if text.count + bytes.count > 256 {
                textOverflow = true
                return
            }
            text.append(contentsOf: bytes)
        }

        mutating func end(_ name: UnsafeRawBufferPointer, line: Int, _ emit: (Fix) -> Void) throws(TrackFileError) {
            defer { depth -= 1 }
            if field != .none && depth == fieldDepth {
                defer { field = .none }
                guard !textOverflow else {
                    throw TrackFileError(.tooLarge, "a point's value longer than 256 bytes", line: line)
                }
                try text.withBytes { b throws(TrackFileError) in
                    switch field {
                    case .time:
                        // An empty time is no time.
                        if b.allSatisfy(XMLTokenizer.isSpace) { return }
                        guard let t = TimeText.iso8601(b) else {
                            throw TrackFileError(.invalidValue, "a 'time' that is not an ISO 8601 time", line: line)
                        }
                        point.time = t
                    case .sat:
                        point.satellites = NumberText.integer(b)
                    default:
                        // A number that does not parse is left out, as GPX readers do with optional fields.
                        let v = NumberText.double(b)
                        switch field {
                        case .ele: point.altitude = v
                        case .speed: point.speed = v
                        case .course: point.course = v
                        case .hdop: point.hdop = v
                        case .vdop: point.vdop = v
                        case .pdop: point.pdop = v
                        default: break
                        }
                    }
                }
                return
            }
            if depth == pointDepth {
                pointDepth = 0
                let pointLine = point.line
                try point.deliver(lastLine: line, to: &statistics, emit) {
                    TrackFileError(.invalidValue, $0, line: pointLine)
                }
            }
        }
    }
}
