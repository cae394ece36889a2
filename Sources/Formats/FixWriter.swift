import Geo

/// The output formats of `keeptrack decode`.
public enum FixFormat: String, CaseIterable, Sendable {
    /// One JSON object per fix per line; the schema is in docs/protocols.md ("decode output (JSON Lines)").
    case jsonl
    /// A header line, then one comma-separated line per fix; unknown values are empty.
    case csv
    /// GPX 1.1: one track segment of track points (fixes with a position only).
    case gpx
    /// A GeoJSON FeatureCollection of Point features (fixes with a position only).
    case geojson
}

/// Streams fixes in a ``FixFormat`` into a byte buffer; the caller writes the buffer out.
///
/// Call ``begin(into:)`` once, ``write(_:into:)`` per fix, ``end(into:)`` once.
public struct FixWriter: Sendable {
    public let format: FixFormat
    private var count = 0
    /// The date text of the last fix written (JSON Lines), reused while the day repeats.
    private var dates = DateText()

    public init(format: FixFormat) {
        self.format = format
    }

    /// Whether the format can represent a fix without a position (jsonl and csv can).
    public var writesFixesWithoutPosition: Bool { format == .jsonl || format == .csv }

    public mutating func begin(into out: inout [UInt8]) {
        switch format {
        case .jsonl: break
        case .csv:
            ByteWriting.appendStatic(
                "time,lat,lon,alt,speed,course,mode,quality,hAcc,vAcc,sats,satsInView,hdop,vdop,pdop,geoidSep,firstLine,lastLine\n",
                to: &out)
        case .gpx:
            ByteWriting.appendStatic(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <gpx version="1.1" creator="keeptrack" xmlns="http://www.topografix.com/GPX/1/1">
                <trk><trkseg>

                """, to: &out)
        case .geojson:
            ByteWriting.appendStatic("{\"type\":\"FeatureCollection\",\"features\":[\n", to: &out)
        }
    }

    public mutating func end(into out: inout [UInt8]) {
        switch format {
        case .jsonl, .csv: break
        case .gpx: ByteWriting.appendStatic("</trkseg></trk>\n</gpx>\n", to: &out)
        case .geojson: ByteWriting.appendStatic("\n]}\n", to: &out)
        }
    }

    /// Appends one fix. Formats that need a position skip fixes without one.
    public mutating func write(_ fix: Fix, into out: inout [UInt8]) {
        switch format {
        case .jsonl: Self.appendJSON(fix, to: &out, dates: &dates)
        case .csv: Self.appendCSV(fix, to: &out)
        case .gpx:
            guard fix.hasPosition else { return }
            Self.appendGPX(fix, to: &out)
        case .geojson:
            guard fix.hasPosition else { return }
            if count > 0 { ByteWriting.appendStatic(",\n", to: &out) }
            Self.appendGeoJSONFeature(fix, to: &out)
        }
        count += 1
    }

    @inline(__always)
    static func number(_ v: Double?, _ decimals: Int, _ out: inout [UInt8], null: StaticString = "null") {
        if let v {
            ByteWriting.appendFixed(v, decimals: decimals, nullText: null, to: &out)
        } else {
            ByteWriting.appendStatic(null, to: &out)
        }
    }

    @inline(__always)
    static func integer(_ v: Int?, _ out: inout [UInt8], null: StaticString = "null") {
        if let v { ByteWriting.appendInt(Int64(v), to: &out) } else { ByteWriting.appendStatic(null, to: &out) }
    }

    /// The `decode` JSON object of one fix and a newline: one line built on the stack through a
    /// ``ByteCursor`` and appended once (at most 1 KiB: 16 keys, 11 numbers of at most 21 bytes, 5
    /// integers of at most 20, a time, two names).
    public static func appendJSON(_ fix: Fix, to out: inout [UInt8]) {
        var dates = DateText()
        appendJSON(fix, to: &out, dates: &dates)
    }

    /// ``appendJSON(_:to:)`` reusing the date text of the previous fix when the day is the same.
    public static func appendJSON(_ fix: Fix, to out: inout [UInt8], dates: inout DateText) {
        ByteWriting.appendLine(capacity: 1024, to: &out) { w in
            w.text("{\"time\":")
            if let t = fix.time {
                w.byte(UInt8(ascii: "\""))
                if let day = t.day { w.date(day, reusing: &dates) }
                w.timeOfDay(t)
                w.byte(UInt8(ascii: "\""))
            } else {
                w.text("null")
            }
            let c = fix.hasPosition ? fix.coordinate : nil
            w.text(",\"lat\":")
            w.fixed9(c?.latitude)
            w.text(",\"lon\":")
            w.fixed9(c?.longitude)
            w.text(",\"alt\":")
            w.fixed3(fix.altitudeMSL)
            w.text(",\"speed\":")
            w.fixed3(fix.speed)
            w.text(",\"course\":")
            w.fixed2(fix.course)
            switch fix.mode {
            case .none: w.text(",\"mode\":\"none\",\"quality\":")
            case .twoD: w.text(",\"mode\":\"2d\",\"quality\":")
            case .threeD: w.text(",\"mode\":\"3d\",\"quality\":")
            }
            if let q = fix.quality {
                w.byte(UInt8(ascii: "\""))
                w.text(qualityName(q))
                w.byte(UInt8(ascii: "\""))
            } else {
                w.text("null")
            }
            w.text(",\"hAcc\":")
            w.fixed2(fix.horizontalAccuracy)
            w.text(",\"vAcc\":")
            w.fixed2(fix.verticalAccuracy)
            w.text(",\"sats\":")
            w.int(fix.satellitesUsed)
            w.text(",\"satsInView\":")
            w.int(fix.satellitesInView)
            w.text(",\"hdop\":")
            w.fixed2(fix.hdop)
            w.text(",\"vdop\":")
            w.fixed2(fix.vdop)
            w.text(",\"pdop\":")
            w.fixed2(fix.pdop)
            w.text(",\"geoidSep\":")
            w.fixed3(fix.geoidSeparation)
            w.text(",\"lines\":")
            if let lines = fix.lines {
                w.byte(UInt8(ascii: "["))
                w.int(Int64(lines.lowerBound))
                w.byte(UInt8(ascii: ","))
                w.int(Int64(lines.upperBound))
                w.byte(UInt8(ascii: "]"))
            } else {
                w.text("null")
            }
            w.text("}\n")
        }
    }

    /// The JSON writer's quality name: ``Fix/Quality/staticName``.
    static func qualityName(_ q: Fix.Quality) -> StaticString { q.staticName }

    public static func appendCSV(_ fix: Fix, to out: inout [UInt8]) {
        if let t = fix.time { t.appendISO8601(to: &out) }
        let c = fix.hasPosition ? fix.coordinate : nil
        out.append(UInt8(ascii: ","))
        number(c?.latitude, 9, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(c?.longitude, 9, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.altitudeMSL, 3, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.speed, 3, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.course, 2, &out, null: "")
        out.append(UInt8(ascii: ","))
        out.append(contentsOf: Array(fix.mode.name.utf8))
        out.append(UInt8(ascii: ","))
        if let q = fix.quality { out.append(contentsOf: Array(q.name.utf8)) }
        out.append(UInt8(ascii: ","))
        number(fix.horizontalAccuracy, 2, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.verticalAccuracy, 2, &out, null: "")
        out.append(UInt8(ascii: ","))
        integer(fix.satellitesUsed, &out, null: "")
        out.append(UInt8(ascii: ","))
        integer(fix.satellitesInView, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.hdop, 2, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.vdop, 2, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.pdop, 2, &out, null: "")
        out.append(UInt8(ascii: ","))
        number(fix.geoidSeparation, 3, &out, null: "")
        out.append(UInt8(ascii: ","))
        integer(fix.lines?.lowerBound, &out, null: "")
        out.append(UInt8(ascii: ","))
        integer(fix.lines?.upperBound, &out, null: "")
        out.append(UInt8(ascii: "\n"))
    }

    public static func appendGPX(_ fix: Fix, to out: inout [UInt8]) {
        guard let c = fix.coordinate else { return }
        ByteWriting.appendStatic("<trkpt lat=\"", to: &out)
        number(c.latitude, 9, &out)
        ByteWriting.appendStatic("\" lon=\"", to: &out)
        number(c.longitude, 9, &out)
        ByteWriting.appendStatic("\">", to: &out)
        if let alt = fix.altitudeMSL {
            ByteWriting.appendStatic("<ele>", to: &out)
            number(alt, 3, &out)
            ByteWriting.appendStatic("</ele>", to: &out)
        }
        // xsd:dateTime needs a date: a time of day alone is left out.
        if let t = fix.time, t.day != nil {
            ByteWriting.appendStatic("<time>", to: &out)
            t.appendISO8601(to: &out)
            ByteWriting.appendStatic("</time>", to: &out)
        }
        if let sep = fix.geoidSeparation {
            ByteWriting.appendStatic("<geoidheight>", to: &out)
            number(sep, 3, &out)
            ByteWriting.appendStatic("</geoidheight>", to: &out)
        }
        switch fix.mode {
        case .twoD: ByteWriting.appendStatic("<fix>2d</fix>", to: &out)
        case .threeD: ByteWriting.appendStatic(fix.quality == .dgps ? "<fix>dgps</fix>" : "<fix>3d</fix>", to: &out)
        case .none: ByteWriting.appendStatic("<fix>none</fix>", to: &out)
        }
        if let s = fix.satellitesUsed {
            ByteWriting.appendStatic("<sat>", to: &out)
            ByteWriting.appendInt(Int64(s), to: &out)
            ByteWriting.appendStatic("</sat>", to: &out)
        }
        for (tag, value): (StaticString, Double?) in [("hdop", fix.hdop), ("vdop", fix.vdop), ("pdop", fix.pdop)] {
            guard let value else { continue }
            out.append(UInt8(ascii: "<"))
            ByteWriting.appendStatic(tag, to: &out)
            out.append(UInt8(ascii: ">"))
            number(value, 2, &out)
            ByteWriting.appendStatic("</", to: &out)
            ByteWriting.appendStatic(tag, to: &out)
            out.append(UInt8(ascii: ">"))
        }
        ByteWriting.appendStatic("</trkpt>\n", to: &out)
    }

    public static func appendGeoJSONFeature(_ fix: Fix, to out: inout [UInt8]) {
        guard let c = fix.coordinate else { return }
        ByteWriting.appendStatic("{\"type\":\"Feature\",\"geometry\":{\"type\":\"Point\",\"coordinates\":[", to: &out)
        number(c.longitude, 9, &out)
        out.append(UInt8(ascii: ","))
        number(c.latitude, 9, &out)
        if let alt = fix.altitudeMSL {
            out.append(UInt8(ascii: ","))
            number(alt, 3, &out)
        }
        ByteWriting.appendStatic("]},\"properties\":", to: &out)
        // The same properties as the JSON Lines object, minus the coordinates.
        var props: [UInt8] = []
        appendJSON(fix, to: &props)
        props.removeLast()  // newline
        out.append(contentsOf: props)
        out.append(UInt8(ascii: "}"))
    }
}
