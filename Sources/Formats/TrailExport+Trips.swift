extension TrailExport {
    /// One trip of a trail: its times and the locations along it.
    public struct TripTrack: Sendable {
        /// The departure and the arrival, in seconds since 1970.
        public var start: Double
        public var end: Double
        /// Metres along the trip.
        public var distance: Double
        /// The locations from start to end, by time.
        public var locations: [TrailRecord]

        /// Creates a trip's track.
        public init(start: Double, end: Double, distance: Double, locations: [TrailRecord]) {
            self.start = start
            self.end = end
            self.distance = distance
            self.locations = locations
        }
    }

    /// GPX 1.1 with one track per trip (`<trk>`, named after the device and the trip's times, its
    /// distance in `<desc>`), each one segment of the trip's locations.
    public static func gpx(device: String, trips: [TripTrack]) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <gpx version="1.1" creator="keeptrack" xmlns="http://www.topografix.com/GPX/1/1">

            """, to: &out)
        for trip in trips {
            ByteWriting.appendStatic("  <trk><name>", to: &out)
            ByteWriting.appendXMLEscaped(device, to: &out)
            ByteWriting.appendStatic(" trip ", to: &out)
            ISOTime.append(trip.start, to: &out)
            ByteWriting.appendStatic(" – ", to: &out)
            ISOTime.append(trip.end, to: &out)
            ByteWriting.appendStatic("</name><desc>", to: &out)
            ByteWriting.appendFixed(trip.distance / 1000, decimals: 2, to: &out)
            ByteWriting.appendStatic(" km</desc><type>trip</type><trkseg>\n", to: &out)
            for r in trip.locations where r.kind == .location {
                point("trkpt", r, indent: "    ", &out)
            }
            ByteWriting.appendStatic("  </trkseg></trk>\n", to: &out)
        }
        ByteWriting.appendStatic("</gpx>\n", to: &out)
        return out
    }
}
