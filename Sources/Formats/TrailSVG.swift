import Geo

#if canImport(Glibc)
    import Glibc
#endif

/// A trail drawn as a self-contained SVG: no map tiles, no network. The track as a line, its
/// regions (circles and polygons, labelled), its stops (where it stayed a while, with how long),
/// region enter and exit points, start and end, a scale bar and a title.
public enum TrailSVG {
    /// A place the trail stayed: at least `minimumDuration` within `radius` metres.
    public struct Stop: Hashable, Sendable {
        public var center: Coordinate
        public var start: Double
        public var end: Double

        public init(center: Coordinate, start: Double, end: Double) {
            self.center = center
            self.start = start
            self.end = end
        }
    }

    /// The stops of a time-ordered trail.
    ///
    /// From each location in turn (the anchor), the run of following locations within `radius` of
    /// it; a run that lasts at least `minimumDuration` is a stop (centred on its mean position) and
    /// the next anchor is the location after it, otherwise the next anchor is the next location.
    ///
    /// - Complexity: O(n log n) for n locations: a segment tree of the locations' bounding boxes finds
    ///   where each run ends (a box whose corners are all within `radius` of the anchor holds no
    ///   location outside it), and prefix sums give the centres.
    public static func stops(_ records: [TrailRecord], radius: Double = 50, minimumDuration: Double = 300) -> [Stop] {
        let points = records.filter { $0.kind == .location }
        let n = points.count
        guard n > 0 else { return [] }
        let tree = BoxTree(points.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) })
        var sumLat = [0.0], sumLon = [0.0]
        sumLat.reserveCapacity(n + 1)
        sumLon.reserveCapacity(n + 1)
        for p in points {
            sumLat.append(sumLat.last! + p.latitude)
            sumLon.append(sumLon.last! + p.longitude)
        }
        var out: [Stop] = []
        var i = 0
        while i < n {
            let anchor = Coordinate(latitude: points[i].latitude, longitude: points[i].longitude)
            // The run ends just before the first later location farther than `radius`.
            let j = (tree.firstOutside(from: i + 1, anchor: anchor, radius: radius) ?? n) - 1
            if points[j].time - points[i].time >= minimumDuration {
                let count = Double(j - i + 1)
                let lat = (sumLat[j + 1] - sumLat[i]) / count
                let lon = (sumLon[j + 1] - sumLon[i]) / count
                out.append(
                    Stop(center: Coordinate(latitude: lat, longitude: lon), start: points[i].time, end: points[j].time))
                i = j + 1
            } else {
                i += 1
            }
        }
        return out
    }

    /// A segment tree over a sequence of coordinates: each node holds its range's latitude and
    /// longitude bounds.
    struct BoxTree {
        let points: [Coordinate]
        let size: Int
        var minLat: [Double], maxLat: [Double], minLon: [Double], maxLon: [Double]

        init(_ points: [Coordinate]) {
            self.points = points
            var size = 1
            while size < points.count { size *= 2 }
            self.size = size
            minLat = Array(repeating: .infinity, count: 2 * size)
            maxLat = Array(repeating: -.infinity, count: 2 * size)
            minLon = Array(repeating: .infinity, count: 2 * size)
            maxLon = Array(repeating: -.infinity, count: 2 * size)
            for (k, p) in points.enumerated() {
                minLat[size + k] = p.latitude
                maxLat[size + k] = p.latitude
                minLon[size + k] = p.longitude
                maxLon[size + k] = p.longitude
            }
            for node in stride(from: size - 1, through: 1, by: -1) {
                minLat[node] = min(minLat[2 * node], minLat[2 * node + 1])
                maxLat[node] = max(maxLat[2 * node], maxLat[2 * node + 1])
                minLon[node] = min(minLon[2 * node], minLon[2 * node + 1])
                maxLon[node] = max(maxLon[2 * node], maxLon[2 * node + 1])
            }
        }

        /// The first index at or after `from` whose coordinate is farther than `radius` metres from
        /// `anchor`, or `nil`.
        func firstOutside(from: Int, anchor: Coordinate, radius: Double) -> Int? {
            guard from < points.count else { return nil }
            return find(node: 1, lo: 0, hi: size - 1, from: from, anchor: anchor, radius: radius)
        }

        private func find(node: Int, lo: Int, hi: Int, from: Int, anchor: Coordinate, radius: Double) -> Int? {
            if hi < from || lo >= points.count { return nil }
            if lo == hi {
                return Geodesy.haversineDistance(anchor, points[lo]) > radius ? lo : nil
            }
            // Distance from a point grows monotonically along a parallel and is unimodal along a
            // meridian, so on a box it is greatest at a corner: corners inside, box inside.
            if boxInside(node, anchor: anchor, radius: radius) { return nil }
            let mid = (lo + hi) / 2
            return find(node: 2 * node, lo: lo, hi: mid, from: from, anchor: anchor, radius: radius)
                ?? find(node: 2 * node + 1, lo: mid + 1, hi: hi, from: from, anchor: anchor, radius: radius)
        }

        private func boxInside(_ node: Int, anchor: Coordinate, radius: Double) -> Bool {
            guard maxLon[node] - minLon[node] < 180 else { return false }
            for lat in [minLat[node], maxLat[node]] {
                for lon in [minLon[node], maxLon[node]] {
                    if Geodesy.haversineDistance(anchor, Coordinate(latitude: lat, longitude: lon)) > radius {
                        return false
                    }
                }
            }
            return true
        }
    }

    /// At most `limit` of `count` indices, evenly spread, the first and the last among them: which
    /// points to draw when there are more than a picture can show.
    public static func decimatedIndices(count: Int, limit: Int) -> [Int] {
        if count <= limit { return Array(0..<count) }
        if limit < 2 { return limit == 1 ? [0] : [] }
        let step = Double(count - 1) / Double(limit - 1)
        return (0..<limit).map { k in k == limit - 1 ? count - 1 : Int((Double(k) * step).rounded(.down)) }
    }

    /// The SVG document.
    /// - Parameters:
    ///   - title: shown at the top (a device id; no coordinates).
    ///   - records: the trail, in time order (locations and region transitions).
    ///   - regions: the regions to draw.
    ///   - width: the picture's width in pixels; the height follows the trail's shape.
    ///   - maxPoints: the most locations the track's line is drawn through: more are thinned out
    ///     evenly (first and last kept) and the subtitle says "N of M points drawn". Stops and bounds
    ///     use every location. The default draws them all.
    ///   - marks: visits and trips to draw (``Marks``): each visit where it was, with its times and
    ///     duration, each trip's part of the track in a colour of its own. `nil` (the default) draws
    ///     the stops ``stops(_:radius:minimumDuration:)`` finds instead.
    public static func render(
        title: String, records: [TrailRecord], regions: [RegionDefinition] = [],
        width: Double = 1000, maxPoints: Int = .max, marks: Marks? = nil
    ) -> String {
        let locations = records.filter { $0.kind == .location }
        let drawn = decimatedIndices(count: locations.count, limit: max(2, maxPoints))
        // Bounds: the trail and the regions, in Web Mercator metres.
        var xs: [Double] = [], ys: [Double] = []
        func add(_ c: Coordinate, _ r: Double = 0) {
            let (x, y) = mercator(c)
            let scale = 1 / cos(c.latitude * .pi / 180)
            xs += [x - r * scale, x + r * scale]
            ys += [y - r * scale, y + r * scale]
        }
        for r in locations { add(Coordinate(latitude: r.latitude, longitude: r.longitude)) }
        for region in regions {
            switch region.shape {
            case .circle(let c, let radius): add(c, radius)
            case .polygon(let ring): ring.forEach { add($0) }
            }
        }
        if xs.isEmpty { add(Coordinate(latitude: 0, longitude: 0), 1000) }
        let minX = xs.min()!, maxX = xs.max()!, minY = ys.min()!, maxY = ys.max()!
        let spanX = max(maxX - minX, 50), spanY = max(maxY - minY, 50)
        let margin = 40.0, top = 60.0
        let scale = (width - 2 * margin) / spanX
        let height = min(max(spanY * scale + top + margin + 30, 300), 2000)
        let s = min(scale, (height - top - margin - 30) / spanY)
        func px(_ c: Coordinate) -> (Double, Double) {
            let (x, y) = mercator(c)
            return (margin + (x - minX) * s, top + (maxY - y) * s)
        }
        func f(_ v: Double) -> String {
            var out: [UInt8] = []
            ByteWriting.appendFixed(v, decimals: 1, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        func text(_ s: String) -> String {
            var out: [UInt8] = []
            ByteWriting.appendXMLEscaped(s, to: &out)
            return String(decoding: out, as: UTF8.self)
        }
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(f(width))" height="\(f(height))" viewBox="0 0 \(f(width)) \(f(height))" font-family="sans-serif" font-size="13">
            <rect width="100%" height="100%" fill="#f7f5ef"/>

            """
        // Regions.
        for region in regions {
            switch region.shape {
            case .circle(let c, let radius):
                let (x, y) = px(c)
                let r = radius / cos(c.latitude * .pi / 180) * s
                svg +=
                    "<circle class=\"region\" cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"\(f(r))\" fill=\"#4f8fd6\" fill-opacity=\"0.15\" stroke=\"#4f8fd6\" stroke-width=\"1.5\"/>\n"
                svg +=
                    "<text x=\"\(f(x))\" y=\"\(f(y - r - 4))\" text-anchor=\"middle\" fill=\"#2a5d94\">\(text(region.id))</text>\n"
            case .polygon(let ring):
                let points = ring.map { px($0) }.map { "\(f($0.0)),\(f($0.1))" }.joined(separator: " ")
                svg +=
                    "<polygon class=\"region\" points=\"\(points)\" fill=\"#4f8fd6\" fill-opacity=\"0.15\" stroke=\"#4f8fd6\" stroke-width=\"1.5\"/>\n"
                if let first = ring.first {
                    let (x, y) = px(first)
                    svg += "<text x=\"\(f(x))\" y=\"\(f(y - 4))\" fill=\"#2a5d94\">\(text(region.id))</text>\n"
                }
            }
        }
        // The track.
        if !locations.isEmpty {
            let points = drawn.map {
                px(Coordinate(latitude: locations[$0].latitude, longitude: locations[$0].longitude))
            }
            .map { "\(f($0.0)),\(f($0.1))" }.joined(separator: " ")
            svg +=
                "<polyline class=\"track\" points=\"\(points)\" fill=\"none\" stroke=\"#d6452f\" stroke-width=\"3\" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>\n"
        }
        if let marks {
            svg += self.marks(marks, locations: locations, drawn: drawn, px: px, metresToPixels: s, width: width)
        }
        // Stops.
        for stop in marks == nil ? stops(records) : [] {
            let (x, y) = px(stop.center)
            let minutes = Int(((stop.end - stop.start) / 60).rounded())
            svg +=
                "<rect class=\"stop\" x=\"\(f(x - 6))\" y=\"\(f(y - 6))\" width=\"12\" height=\"12\" fill=\"#333\"/>\n"
            svg += "<text x=\"\(f(x + 9))\" y=\"\(f(y + 4))\" fill=\"#333\">stop \(minutes) min</text>\n"
        }
        // Region transitions.
        for r in records where r.kind == .enter || r.kind == .exit {
            let (x, y) = px(Coordinate(latitude: r.latitude, longitude: r.longitude))
            let color = r.kind == .enter ? "#2e9e44" : "#b23a8a"
            svg +=
                "<circle class=\"\(r.kind.rawValue)\" cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"6\" fill=\"\(color)\" stroke=\"white\" stroke-width=\"2\"/>\n"
            svg +=
                "<text x=\"\(f(x + 9))\" y=\"\(f(y - 6))\" fill=\"\(color)\">\(r.kind.rawValue) \(text(r.region ?? ""))</text>\n"
        }
        // Start and end.
        if let first = locations.first, let last = locations.last {
            let (x0, y0) = px(Coordinate(latitude: first.latitude, longitude: first.longitude))
            let (x1, y1) = px(Coordinate(latitude: last.latitude, longitude: last.longitude))
            svg +=
                "<circle class=\"start\" cx=\"\(f(x0))\" cy=\"\(f(y0))\" r=\"7\" fill=\"white\" stroke=\"#d6452f\" stroke-width=\"3\"/>\n"
            svg += "<circle class=\"end\" cx=\"\(f(x1))\" cy=\"\(f(y1))\" r=\"7\" fill=\"#d6452f\"/>\n"
        }
        // Title and scale bar.
        let span =
            locations.first.flatMap { a in
                locations.last.map { b in
                    " · \(ISOTime.string(a.time).prefix(16).replacingT()) – \(ISOTime.string(b.time).prefix(16).replacingT()) UTC"
                }
            } ?? ""
        let pointCount =
            drawn.count < locations.count
            ? "\(drawn.count) of \(locations.count) points drawn" : "\(locations.count) points"
        svg +=
            "<text x=\"\(f(margin))\" y=\"28\" font-size=\"18\" font-weight=\"bold\" fill=\"#222\">\(text(title))</text>\n"
        svg += "<text x=\"\(f(margin))\" y=\"48\" fill=\"#555\">\(pointCount)\(text(span))</text>\n"
        let midLat = locations.isEmpty ? 0 : locations.reduce(0) { $0 + $1.latitude } / Double(locations.count)
        let metresPerPixel = cos(midLat * .pi / 180) / s
        let bar = niceLength(metresPerPixel * 150)
        let barPixels = bar / metresPerPixel
        svg +=
            "<g class=\"scale\"><line x1=\"\(f(margin))\" y1=\"\(f(height - 20))\" x2=\"\(f(margin + barPixels))\" y2=\"\(f(height - 20))\" stroke=\"#222\" stroke-width=\"3\"/>"
        svg +=
            "<text x=\"\(f(margin + barPixels + 8))\" y=\"\(f(height - 15))\" fill=\"#222\">\(bar >= 1000 ? "\(f(bar / 1000)) km" : "\(Int(bar)) m")</text></g>\n"
        svg += "</svg>\n"
        return svg
    }

    /// Web Mercator metres.
    static func mercator(_ c: Coordinate) -> (Double, Double) {
        let r = 6_378_137.0
        let x = r * c.longitude * .pi / 180
        let y = r * log(tan(.pi / 4 + c.latitude * .pi / 360))
        return (x, y)
    }

    /// 1, 2 or 5 times a power of ten, at most `metres`.
    static func niceLength(_ metres: Double) -> Double {
        let p = pow(10, floor(log10(max(metres, 1))))
        for m in [5.0, 2, 1] where m * p <= metres { return m * p }
        return p
    }
}

extension Substring {
    func replacingT() -> String { String(map { $0 == "T" ? " " : $0 }) }
}
