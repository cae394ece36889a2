import Geo

#if canImport(Glibc)
    import Glibc
#endif

extension TrailSVG {
    /// What ``render(title:records:regions:width:maxPoints:marks:)`` marks on a trail: its visits
    /// (the device's `visit` events, or the endpoint's stops) and the trips between them.
    public struct Marks: Sendable {
        /// A stay: where, how far its fixes spread, from when until when (`nil`: still there).
        public struct Visit: Hashable, Sendable {
            public var center: Coordinate
            public var radius: Double
            public var arrival: Double
            public var departure: Double?

            public init(center: Coordinate, radius: Double, arrival: Double, departure: Double?) {
                self.center = center
                self.radius = radius
                self.arrival = arrival
                self.departure = departure
            }
        }

        /// A trip: its times and length.
        public struct Trip: Hashable, Sendable {
            public var start: Double
            public var end: Double
            public var distance: Double

            public init(start: Double, end: Double, distance: Double) {
                self.start = start
                self.end = end
                self.distance = distance
            }
        }

        public var visits: [Visit]
        public var trips: [Trip]

        public init(visits: [Visit] = [], trips: [Trip] = []) {
            self.visits = visits
            self.trips = trips
        }
    }

    /// The colours trips are drawn in, in turn (the track's own is red).
    static let tripColours = ["#1f6fd1", "#2e9e44", "#8e44ad", "#e67e22", "#16a2b8", "#8c564b"]

    /// The trips' parts of the track (through the points drawn), then the visits: a disc of the
    /// visit's radius (at least 7 px) and a label `20:30–21:15 UTC · 45 min` (`from 01:09 UTC, still
    /// there`). Each element has `class` and `data-*` times, for people and tools.
    static func marks(
        _ marks: Marks, locations: [TrailRecord], drawn: [Int], px: (Coordinate) -> (Double, Double),
        metresToPixels s: Double, width: Double
    ) -> String {
        func f(_ v: Double) -> String {
            var out: [UInt8] = []
            ByteWriting.appendFixed(v, decimals: 1, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        var svg = ""
        // Labels already placed: a label that would overlap one (a place visited twice, a walk back
        // along the way out) goes a line lower; one near the right edge ends at its point.
        var placed: [(x: Double, y: Double)] = []
        func place(_ x: Double, _ y: Double, _ text: String) -> (x: Double, y: Double, anchor: String) {
            let length = Double(text.count) * 7
            let rightAligned = x + length > width - 10
            var y = y
            while placed.contains(where: { abs($0.x - x) < length && abs($0.y - y) < 14 }) { y += 16 }
            placed.append((x, y))
            return (rightAligned ? x - 16 : x, y, rightAligned ? " text-anchor=\"end\"" : "")
        }
        for (n, trip) in marks.trips.enumerated() {
            let colour = tripColours[n % tripColours.count]
            let along = drawn.filter { locations[$0].time >= trip.start && locations[$0].time <= trip.end }
            guard along.count >= 2 else { continue }
            let points = along.map {
                px(Coordinate(latitude: locations[$0].latitude, longitude: locations[$0].longitude))
            }
            let line = points.map { "\(f($0.0)),\(f($0.1))" }.joined(separator: " ")
            svg +=
                "<polyline class=\"trip\" data-start=\"\(ISOTime.string(trip.start))\" "
                + "data-end=\"\(ISOTime.string(trip.end))\" points=\"\(line)\" fill=\"none\" stroke=\"\(colour)\" "
                + "stroke-width=\"4\" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>\n"
            let (x, y) = points[points.count / 2]
            let km = trip.distance / 1000
            let length = km >= 10 ? "\(Int(km.rounded())) km" : "\(f(km)) km"
            let label = "trip \(n + 1): \(length), \(span(trip.end - trip.start))"
            let at = place(x + 8, y + 14, label)
            svg +=
                "<text class=\"trip-label\" x=\"\(f(at.x))\" y=\"\(f(at.y))\"\(at.anchor) fill=\"\(colour)\">"
                + "\(label)</text>\n"
        }
        for visit in marks.visits {
            let (x, y) = px(visit.center)
            let r = max(7, visit.radius / cos(visit.center.latitude * .pi / 180) * s)
            let times: String
            if let departure = visit.departure {
                times = "\(clock(visit.arrival))–\(clock(departure)) UTC · \(span(departure - visit.arrival))"
            } else {
                times = "from \(clock(visit.arrival)) UTC, still there"
            }
            let departure = visit.departure.map { " data-departure=\"\(ISOTime.string($0))\"" } ?? ""
            svg +=
                "<circle class=\"visit\" data-arrival=\"\(ISOTime.string(visit.arrival))\"\(departure) "
                + "cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"\(f(r))\" fill=\"#333\" fill-opacity=\"0.25\" stroke=\"#333\" "
                + "stroke-width=\"2\"/>\n"
            let at = place(x + r + 4, y + 4, times)
            svg +=
                "<text class=\"visit-label\" x=\"\(f(at.x))\" y=\"\(f(at.y))\"\(at.anchor) fill=\"#222\">"
                + "\(times)</text>\n"
        }
        return svg
    }

    /// A duration as `45 min` or `3 h 01 min`.
    static func span(_ seconds: Double) -> String {
        let minutes = Int((max(0, seconds) / 60).rounded())
        guard minutes >= 60 else { return "\(minutes) min" }
        let m = minutes % 60
        return "\(minutes / 60) h \(m < 10 ? "0" : "")\(m) min"
    }

    /// `HH:MM` of a time, UTC.
    static func clock(_ t: Double) -> String {
        String(ISOTime.string(t).dropFirst(11).prefix(5))
    }
}
