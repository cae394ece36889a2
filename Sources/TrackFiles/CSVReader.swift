import Geo

/// CSV with a header line, streamed (RFC 4180 quoting; `,`, `;` or tab, whichever the header
/// uses most).
///
/// Columns are found by name, case and punctuation ignored: latitude (`lat`, `latitude`),
/// longitude (`lon`, `lng`, `long`, `longitude`), time (`time`, `timestamp`, `tst`, `fixTime`,
/// `datetime`, `deviceTime`, `date_time`: ISO 8601, or epoch seconds or milliseconds), and when
/// present altitude (`alt`, `altitude`, `ele`, `elevation`, metres), speed (`speed`, `velocity`,
/// m/s), course (`course`, `bearing`, `heading`, `cog`, degrees) and accuracy (`accuracy`, `acc`,
/// `hacc`, `horizontal_accuracy`, metres). A row with an empty position or time is counted in
/// ``TrackFileStatistics/untimed`` and left out; a cell that is not a number or a time is an error
/// naming its line.
public struct CSVReader: TrackReader {
    enum Role: UInt8 {
        case none, latitude, longitude, time, altitude, speed, course, accuracy, verticalAccuracy
    }

    enum State: UInt8 {
        case header, fieldStart, unquoted, quoted, quoteInQuoted
    }

    public static let maxLine = 64 * 1024

    var state = State.header
    public private(set) var position = TrackFilePosition()
    public private(set) var statistics = TrackFileStatistics()
    var header: [UInt8] = []
    var separator: UInt8 = 0x2C
    var roles: [Role] = []
    var column = 0
    var field: [UInt8] = []
    var row = PointFields()
    var rowLine = 1
    var rowHasContent = false
    var cells: [[UInt8]] = []

    public init() {
        field.reserveCapacity(64)
    }

    static func role(_ name: [UInt8]) -> Role {
        // Lower case, letters and digits only: `Fix Time`, `fix_time` and `fixTime` are one name.
        var key: [UInt8] = []
        for c in name {
            if c >= 0x41 && c <= 0x5A {
                key.append(c + 32)
            } else if (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) {
                key.append(c)
            }
        }
        switch String(decoding: key, as: UTF8.self) {
        case "lat", "latitude": return .latitude
        case "lon", "lng", "long", "longitude": return .longitude
        case "time", "timestamp", "tst", "fixtime", "datetime", "devicetime", "utc", "isotime": return .time
        case "alt", "altitude", "ele", "elevation": return .altitude
        case "speed", "velocity": return .speed
        case "course", "bearing", "heading", "cog": return .course
        case "accuracy", "acc", "hacc", "horizontalaccuracy": return .accuracy
        case "vacc", "verticalaccuracy": return .verticalAccuracy
        default: return .none
        }
    }

    /// The separator a header line uses: the most frequent of `,`, `;` and tab outside quotes.
    static func separator(of line: UnsafeRawBufferPointer) -> UInt8 {
        var counts = (comma: 0, semicolon: 0, tab: 0)
        var quoted = false
        for c in line {
            if c == 0x22 { quoted.toggle() }
            if quoted { continue }
            if c == 0x2C {
                counts.comma += 1
            } else if c == 0x3B {
                counts.semicolon += 1
            } else if c == 0x09 {
                counts.tab += 1
            }
        }
        if counts.tab > counts.comma && counts.tab >= counts.semicolon { return 0x09 }
        if counts.semicolon > counts.comma { return 0x3B }
        return 0x2C
    }

    /// The header's columns, split as rows are (quotes removed).
    static func columns(of line: UnsafeRawBufferPointer, separator: UInt8) -> [[UInt8]] {
        var out: [[UInt8]] = [[]]
        var quoted = false
        var k = 0
        while k < line.count {
            let c = line[k]
            if quoted {
                if c == 0x22 {
                    if k + 1 < line.count && line[k + 1] == 0x22 {
                        out[out.count - 1].append(0x22)
                        k += 1
                    } else {
                        quoted = false
                    }
                } else {
                    out[out.count - 1].append(c)
                }
            } else if c == 0x22 {
                quoted = true
            } else if c == separator {
                out.append([])
            } else if c != 0x0D {
                out[out.count - 1].append(c)
            }
            k += 1
        }
        return out
    }

    /// Whether a line is a CSV header (the sniffer's test): two columns or more, one of them a
    /// latitude, a longitude or a time. One that names no latitude or no longitude is still a
    /// header, which the reader then refuses saying so, rather than a log of nothing.
    static func isHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        let cells = columns(of: line, separator: separator(of: line))
        guard cells.count >= 2 else { return false }
        let roles = cells.map(role)
        return roles.contains(.latitude) || roles.contains(.longitude) || roles.contains(.time)
    }

    mutating func fail(_ code: TrackFileError.Code, _ message: String, line: Int? = nil) -> TrackFileError {
        TrackFileError(code, message, format: .csv, line: line ?? position.line, byteOffset: position.offset)
    }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(TrackFileError) {
        var i = 0
        let n = bytes.count
        while i < n {
            let c = bytes[i]
            switch state {
            case .header:
                if c == 0x0A {
                    try endHeader()
                } else {
                    guard header.count < Self.maxLine else {
                        throw fail(.tooLarge, "a header line longer than \(Self.maxLine) bytes")
                    }
                    header.append(c)
                }
            case .fieldStart:
                if c == 0x22 {
                    state = .quoted
                    rowHasContent = true
                } else {
                    state = .unquoted
                    continue
                }
            case .unquoted:
                if try !endsField(c, emit) {
                    if c != 0x0D { rowHasContent = true }
                    try append(c)
                }
            case .quoted:
                if c == 0x22 {
                    state = .quoteInQuoted
                } else {
                    try append(c)
                }
            case .quoteInQuoted:
                if c == 0x22 {
                    try append(c)
                    state = .quoted
                } else if try endsField(c, emit) {
                    // The field ended (and the row, at a line end).
                } else if c == 0x0D || c == 0x20 {
                    // CRLF, or blanks after the closing quote.
                } else {
                    throw fail(.malformed, "a byte after a closing quote")
                }
            }
            if c == 0x0A { position.line += 1 }
            position.offset += 1
            i += 1
        }
    }

    private mutating func endHeader() throws(TrackFileError) {
        var start = 0
        if header.count >= 3 && header[0] == 0xEF && header[1] == 0xBB && header[2] == 0xBF { start = 3 }
        let line = Array(header[start...])
        let sep = line.withUnsafeBytes { Self.separator(of: $0) }
        separator = sep
        roles = line.withUnsafeBytes { Self.columns(of: $0, separator: sep) }.map(Self.role)
        // One column of each role: the first.
        var seen = Set<UInt8>()
        for k in roles.indices where roles[k] != .none {
            if !seen.insert(roles[k].rawValue).inserted { roles[k] = .none }
        }
        guard roles.contains(.latitude), roles.contains(.longitude) else {
            throw TrackFileError(
                .missingField, "the header names no latitude or no longitude column", format: .csv, line: 1,
                byteOffset: 0)
        }
        guard roles.contains(.time) else {
            throw TrackFileError(.missingField, "the header names no time column", format: .csv, line: 1, byteOffset: 0)
        }
        header = []
        state = .fieldStart
        column = 0
        rowLine = 2
        row = PointFields()
    }

    /// A separator or a line end after a field ends the field (and the row, at a line end): `false`
    /// for any other byte.
    @inline(__always) private mutating func endsField(_ c: UInt8, _ emit: (Fix) -> Void) throws(TrackFileError) -> Bool
    {
        guard c == separator || c == 0x0A else { return false }
        try endField()
        if c == 0x0A { try endRow(emit) }
        state = .fieldStart
        return true
    }

    @inline(__always) private mutating func append(_ c: UInt8) throws(TrackFileError) {
        guard column < roles.count, roles[column] != .none else { return }
        guard field.count < 256 else { throw fail(.tooLarge, "a cell longer than 256 bytes") }
        field.append(c)
    }

    private mutating func endField() throws(TrackFileError) {
        defer {
            column += 1
            field.removeAll(keepingCapacity: true)
        }
        guard column < roles.count else { return }
        let role = roles[column]
        guard role != .none else { return }
        try field.withBytes { b throws(TrackFileError) in
            if b.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
            if role == .time {
                guard let t = TimeText.any(b) else {
                    throw fail(.invalidValue, "a time cell that is not ISO 8601 or epoch seconds", line: rowLine)
                }
                row.time = t
                return
            }
            guard let v = NumberText.double(b) else {
                throw fail(.invalidValue, "a \(Self.name(role)) cell that is not a number", line: rowLine)
            }
            switch role {
            case .latitude: row.latitude = v
            case .longitude: row.longitude = v
            case .altitude: row.altitude = v
            case .speed: row.speed = v
            case .course: row.course = v
            case .accuracy: row.horizontalAccuracy = v
            case .verticalAccuracy: row.verticalAccuracy = v
            case .time, .none: break
            }
        }
    }

    static func name(_ role: Role) -> String {
        switch role {
        case .latitude: "latitude"
        case .longitude: "longitude"
        case .altitude: "altitude"
        case .speed: "speed"
        case .course: "course"
        case .accuracy, .verticalAccuracy: "accuracy"
        case .time: "time"
        case .none: "other"
        }
    }

    private mutating func endRow(_ emit: (Fix) -> Void) throws(TrackFileError) {
        defer {
            row = PointFields()
            column = 0
            rowHasContent = false
            rowLine = position.line + 1
        }
        // Blank lines are no rows.
        guard rowHasContent else { return }
        row.line = rowLine
        let (line, offset) = (rowLine, position.offset)
        try row.deliver(lastLine: position.line, to: &statistics, emit) {
            TrackFileError(.invalidValue, $0, format: .csv, line: line, byteOffset: offset)
        }
    }

    public mutating func finish(_ emit: (Fix) -> Void) throws(TrackFileError) {
        switch state {
        case .header:
            if header.isEmpty { throw fail(.malformed, "no header line") }
            try endHeader()
        case .quoted:
            throw fail(.malformed, "the file ends inside a quoted cell: truncated?")
        case .unquoted, .quoteInQuoted:
            try endField()
            try endRow(emit)
        case .fieldStart:
            if column > 0 {
                try endField()
                try endRow(emit)
            }
        }
    }
}
