/// A stored trail as a file: GeoJSON (a LineString of the locations plus a Point per region
/// transition and visit) or GPX (one track segment, transitions and visits as waypoints).
public enum TrailExport {
    /// A GeoJSON FeatureCollection (RFC 7946): the track as a LineString with the device and time
    /// span (a Point when it has one location, a null geometry when none), each region transition
    /// as a Point feature with `event`, `region` and `time`, each visit once with `time` (its
    /// arrival) and `departure` (`null` while the device is there). A location marked an outlier
    /// (``TrailRecord/outlier``, in a trail asked for with them) is no part of the line: a Point
    /// feature with `"event":"outlier"`, its `reason` and `time`.
    public static func geoJSON(device: String, records: [TrailRecord]) -> [UInt8] {
        var out: [UInt8] = []
        let locations = records.filter { $0.kind == .location && $0.outlier == nil }
        ByteWriting.appendStatic("{\"type\":\"FeatureCollection\",\"features\":[", to: &out)
        ByteWriting.appendStatic("{\"type\":\"Feature\",\"properties\":{\"device\":", to: &out)
        ByteWriting.appendJSONString(device, to: &out)
        ByteWriting.appendStatic(",\"points\":", to: &out)
        ByteWriting.appendInt(Int64(locations.count), to: &out)
        if let first = locations.first, let last = locations.last {
            ByteWriting.appendStatic(",\"from\":\"", to: &out)
            ISOTime.append(first.time, to: &out)
            ByteWriting.appendStatic("\",\"to\":\"", to: &out)
            ISOTime.append(last.time, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        ByteWriting.appendStatic(",\"times\":[", to: &out)
        for (i, r) in locations.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            ISOTime.append(r.time, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        // RFC 7946: a LineString has two or more positions; one location is a Point, none no geometry.
        switch locations.count {
        case 0:
            ByteWriting.appendStatic("]},\"geometry\":null}", to: &out)
        case 1:
            ByteWriting.appendStatic("]},\"geometry\":{\"type\":\"Point\",\"coordinates\":", to: &out)
            position(locations[0], &out)
            ByteWriting.appendStatic("}}", to: &out)
        default:
            ByteWriting.appendStatic("]},\"geometry\":{\"type\":\"LineString\",\"coordinates\":[", to: &out)
            for (i, r) in locations.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                position(r, &out)
            }
            ByteWriting.appendStatic("]}}", to: &out)
        }
        for r in marks(records) {
            ByteWriting.appendStatic(",{\"type\":\"Feature\",\"properties\":{\"event\":\"", to: &out)
            out.append(contentsOf: r.kind.rawValue.utf8)
            if r.kind == .visit {
                ByteWriting.appendStatic("\",\"time\":\"", to: &out)
                ISOTime.append(r.time, to: &out)
                ByteWriting.appendStatic("\",\"departure\":", to: &out)
                ISOTime.appendQuoted(r.span?.end, to: &out)
            } else {
                ByteWriting.appendStatic("\",\"region\":", to: &out)
                ByteWriting.appendJSONString(r.region ?? "", to: &out)
                ByteWriting.appendStatic(",\"time\":\"", to: &out)
                ISOTime.append(r.time, to: &out)
                out.append(UInt8(ascii: "\""))
            }
            ByteWriting.appendStatic("},\"geometry\":{\"type\":\"Point\",\"coordinates\":", to: &out)
            position(r, &out)
            ByteWriting.appendStatic("}}", to: &out)
        }
        for r in records where r.kind == .location {
            guard let reason = r.outlier else { continue }
            ByteWriting.appendStatic(
                ",{\"type\":\"Feature\",\"properties\":{\"event\":\"outlier\",\"reason\":", to: &out)
            ByteWriting.appendJSONString(reason, to: &out)
            ByteWriting.appendStatic(",\"time\":\"", to: &out)
            ISOTime.append(r.time, to: &out)
            ByteWriting.appendStatic("\"},\"geometry\":{\"type\":\"Point\",\"coordinates\":", to: &out)
            position(r, &out)
            ByteWriting.appendStatic("}}", to: &out)
        }
        ByteWriting.appendStatic("]}\n", to: &out)
        return out
    }

    /// The records drawn as points beside the track: region transitions and visits, by time; a
    /// visit once, though a device records it twice (at arrival, then at departure with both
    /// times): its latest record. Trips are the track between visits (exported on their own as
    /// GPX), not points.
    static func marks(_ records: [TrailRecord]) -> [TrailRecord] {
        var out: [TrailRecord] = []
        var visitAt: [Double: Int] = [:]
        for r in records where r.kind != .location && r.kind != .trip {
            if r.kind == .visit {
                if let i = visitAt[r.time] {
                    if r.span?.end != nil || out[i].span?.end == nil { out[i] = r }
                    continue
                }
                visitAt[r.time] = out.count
            }
            out.append(r)
        }
        return out
    }

    static func position(_ r: TrailRecord, _ out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        ByteWriting.appendFixed(r.longitude, decimals: 9, to: &out)
        out.append(UInt8(ascii: ","))
        ByteWriting.appendFixed(r.latitude, decimals: 9, to: &out)
        if let a = r.altitude {
            out.append(UInt8(ascii: ","))
            ByteWriting.appendFixed(a, decimals: 3, to: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// GPX 1.1: transitions and visits as waypoints (a visit once, at its arrival, its departure
    /// in `desc`), the locations as one track segment (a location marked an outlier as a waypoint
    /// named `outlier REASON`).
    public static func gpx(device: String, records: [TrailRecord]) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <gpx version="1.1" creator="keeptrack" xmlns="http://www.topografix.com/GPX/1/1">

            """, to: &out)
        for r in marks(records) { point("wpt", r, indent: "  ", &out) }
        for r in records where r.kind == .location && r.outlier != nil { point("wpt", r, indent: "  ", &out) }
        ByteWriting.appendStatic("  <trk><name>", to: &out)
        ByteWriting.appendXMLEscaped(device, to: &out)
        ByteWriting.appendStatic("</name><trkseg>\n", to: &out)
        for r in records where r.kind == .location && r.outlier == nil {
            point("trkpt", r, indent: "    ", &out)
        }
        ByteWriting.appendStatic("  </trkseg></trk>\n</gpx>\n", to: &out)
        return out
    }

    static func point(_ tag: StaticString, _ r: TrailRecord, indent: StaticString, _ out: inout [UInt8]) {
        ByteWriting.appendStatic(indent, to: &out)
        out.append(UInt8(ascii: "<"))
        ByteWriting.appendStatic(tag, to: &out)
        ByteWriting.appendStatic(" lat=\"", to: &out)
        ByteWriting.appendFixed(r.latitude, decimals: 9, to: &out)
        ByteWriting.appendStatic("\" lon=\"", to: &out)
        ByteWriting.appendFixed(r.longitude, decimals: 9, to: &out)
        ByteWriting.appendStatic("\">", to: &out)
        if let a = r.altitude {
            ByteWriting.appendStatic("<ele>", to: &out)
            ByteWriting.appendFixed(a, decimals: 3, to: &out)
            ByteWriting.appendStatic("</ele>", to: &out)
        }
        ByteWriting.appendStatic("<time>", to: &out)
        ISOTime.append(r.time, to: &out)
        ByteWriting.appendStatic("</time>", to: &out)
        if let reason = r.outlier {
            ByteWriting.appendStatic("<name>outlier ", to: &out)
            ByteWriting.appendXMLEscaped(reason, to: &out)
            ByteWriting.appendStatic("</name>", to: &out)
        } else if r.kind != .location {
            ByteWriting.appendStatic("<name>", to: &out)
            out.append(contentsOf: r.kind.rawValue.utf8)
            if let region = r.region {
                out.append(UInt8(ascii: " "))
                ByteWriting.appendXMLEscaped(region, to: &out)
            }
            ByteWriting.appendStatic("</name>", to: &out)
            if r.kind == .visit {
                // GPX has no end time: the departure is said in the description.
                ByteWriting.appendStatic("<desc>", to: &out)
                if let departure = r.span?.end {
                    ByteWriting.appendStatic("until ", to: &out)
                    ISOTime.append(departure, to: &out)
                } else {
                    ByteWriting.appendStatic("still there", to: &out)
                }
                ByteWriting.appendStatic("</desc>", to: &out)
            }
        }
        ByteWriting.appendStatic("</", to: &out)
        ByteWriting.appendStatic(tag, to: &out)
        ByteWriting.appendStatic(">\n", to: &out)
    }
}
