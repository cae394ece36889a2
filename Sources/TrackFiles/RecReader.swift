import Geo

/// An OwnTracks Recorder `.rec` file, streamed: lines of `ISO-8601-time TAB topic TAB JSON`.
///
/// A `location` payload gives a fix (`lat`, `lon`, `tst` or else the line's time, `acc`, `alt`,
/// `vac`, `vel` in km/h, `cog`); every other payload (`transition`, `waypoint`, `lwt`, `card`,
/// ...) is counted in ``TrackFileStatistics/otherRecords`` and left out. Each payload is read by
/// ``JSONTokenizer`` as the line goes, so a long `card` line costs no more memory than a short one.
public struct RecReader: TrackReader {
    enum State: UInt8 {
        case time, topic, json, skipLine
    }

    var state = State.time
    public private(set) var position = TrackFilePosition()
    public var statistics: TrackFileStatistics { consumer.statistics }
    var timeField: [UInt8] = []
    var lineTime: GNSSTime?
    var tokenizer = JSONTokenizer()
    var consumer = Consumer()
    var lineStart: Int64 = 0

    public init() {}

    func fail(_ code: TrackFileError.Code, _ message: String, at offset: Int64? = nil) -> TrackFileError {
        TrackFileError(code, message, format: .owntracksRec, line: position.line, byteOffset: offset ?? position.offset)
    }

    /// Whether a line looks like the start of a `.rec` line (the sniffer's test).
    static func isRecLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let tab = line.firstIndex(of: 0x09), tab >= 16 else { return false }
        return TimeText.iso8601(UnsafeRawBufferPointer(rebasing: line[..<tab])) != nil
            && line[(tab + 1)...].contains(0x09)
    }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(TrackFileError) {
        var i = 0
        let n = bytes.count
        while i < n {
            switch state {
            case .time:
                let c = bytes[i]
                if c == 0x09 {
                    guard let t = timeField.withUnsafeBytes({ TimeText.iso8601($0) }) else {
                        throw fail(.malformed, "a line that does not start with an ISO 8601 time", at: lineStart)
                    }
                    lineTime = t
                    state = .topic
                } else if c == 0x0A {
                    guard timeField.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) else {
                        throw fail(.malformed, "a line without a tab after its time", at: lineStart)
                    }
                    newLine()
                } else {
                    guard timeField.count < 64 else {
                        throw fail(.malformed, "a line that does not start with an ISO 8601 time", at: lineStart)
                    }
                    timeField.append(c)
                }
                advance(c)
                i += 1
            case .topic:
                let c = bytes[i]
                if c == 0x09 {
                    tokenizer = JSONTokenizer()
                    tokenizer.position = position
                    tokenizer.position.offset += 1
                    consumer.startLine()
                    state = .json
                } else if c == 0x0A {
                    throw fail(.malformed, "a line without a payload after its topic", at: lineStart)
                }
                advance(c)
                i += 1
            case .json:
                var j = i
                while j < n, bytes[j] != 0x0A { j += 1 }
                if j > i {
                    let line = UnsafeRawBufferPointer(rebasing: bytes[i..<j])
                    try TrackFileError.reading(.owntracksRec) { () throws(TrackFileError) in
                        try tokenizer.feed(line, &consumer, emit)
                    }
                    position.offset += Int64(j - i)
                    i = j
                }
                if i < n {
                    try endLine(emit)
                    advance(0x0A)
                    i += 1
                }
            case .skipLine:
                if bytes[i] == 0x0A { newLine() }
                advance(bytes[i])
                i += 1
            }
        }
    }

    @inline(__always) private mutating func advance(_ c: UInt8) {
        position.offset += 1
        if c == 0x0A {
            position.line += 1
            lineStart = position.offset
        }
    }

    private mutating func newLine() {
        timeField.removeAll(keepingCapacity: true)
        lineTime = nil
        state = .time
    }

    private mutating func endLine(_ emit: (Fix) -> Void) throws(TrackFileError) {
        try TrackFileError.reading(.owntracksRec) { () throws(TrackFileError) in try tokenizer.finish(&consumer, emit) }
        do {
            try consumer.endLine(lineTime: lineTime, line: position.line, emit)
        } catch {
            var e = error
            e.byteOffset = lineStart
            throw e
        }
        newLine()
    }

    public mutating func finish(_ emit: (Fix) -> Void) throws(TrackFileError) {
        switch state {
        case .json: try endLine(emit)
        case .time:
            guard timeField.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) else {
                throw fail(.malformed, "the file ends inside a line: truncated?")
            }
        case .topic: throw fail(.malformed, "the file ends inside a line: truncated?")
        case .skipLine: break
        }
    }

    struct Consumer: JSONConsumer {
        enum Key: UInt8 {
            case other, type, lat, lon, tst, acc, alt, vac, vel, cog
        }

        var statistics = TrackFileStatistics()
        var key = Key.other
        var fields = PointFields()
        var isLocation = false
        var isObject = false

        mutating func startLine() {
            fields = PointFields()
            isLocation = false
            isObject = false
            key = .other
        }

        mutating func begin(object: Bool, depth: Int) throws(TrackFileError) {
            if depth == 0 { isObject = object }
            key = .other
        }

        mutating func end(object: Bool, depth: Int, _ emit: (Fix) -> Void) throws(TrackFileError) {}

        mutating func key(_ b: UnsafeRawBufferPointer, depth: Int) {
            guard depth == 1 else {
                key = .other
                return
            }
            func eq(_ s: StaticString) -> Bool {
                b.count == s.utf8CodeUnitCount
                    && b.elementsEqual(UnsafeRawBufferPointer(start: s.utf8Start, count: b.count))
            }
            key =
                if eq("_type") { .type } else if eq("lat") { .lat } else if eq("lon") { .lon } else if eq("tst") {
                    .tst
                } else if eq("acc") { .acc } else if eq("alt") { .alt } else if eq("vac") { .vac } else if eq("vel") {
                    .vel
                } else if eq("cog") { .cog } else { .other }
        }

        mutating func scalar(
            _ kind: JSONScalar, _ b: UnsafeRawBufferPointer, depth: Int, _ emit: (Fix) -> Void
        ) throws(TrackFileError) {
            defer { key = .other }
            guard depth == 1, key != .other else { return }
            if key == .type {
                isLocation = kind == .string && b.elementsEqual("location".utf8)
                return
            }
            guard kind == .number else { return }
            let v = NumberText.double(b)
            switch key {
            case .lat: fields.latitude = v
            case .lon: fields.longitude = v
            case .tst:
                guard let t = TimeText.epoch(b) else {
                    throw TrackFileError(.invalidValue, "a 'tst' that is not a number of seconds")
                }
                fields.time = t
            case .acc: fields.horizontalAccuracy = v
            case .alt: fields.altitude = v
            case .vac: fields.verticalAccuracy = v
            case .vel: fields.speed = v.map { $0 / 3.6 }
            case .cog: fields.course = v
            case .type, .other: break
            }
        }

        mutating func endLine(lineTime: GNSSTime?, line: Int, _ emit: (Fix) -> Void) throws(TrackFileError) {
            guard isObject, isLocation else {
                statistics.otherRecords += 1
                return
            }
            var f = fields
            if f.time == nil { f.time = lineTime }
            f.line = line
            try f.deliver(lastLine: line, to: &statistics, emit) {
                TrackFileError(.invalidValue, $0, format: .owntracksRec, line: line)
            }
        }
    }
}
