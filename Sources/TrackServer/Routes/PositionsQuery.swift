import Formats
import Hummingbird
import TrackStore

/// The area, time range and device of a `GET /v1/positions` query.
struct PositionsQuery: Hashable, Sendable {
    /// The largest `radius` of `near`, in metres.
    static let maxRadius = 1_000_000.0

    var area: PositionArea
    var from: Double
    var to: Double
    var device: String?

    init(area: PositionArea, from: Double, to: Double, device: String?) {
        (self.area, self.from, self.to, self.device) = (area, from, to, device)
    }

    /// Reads `bbox=W,S,E,N` or `near=LAT,LON&radius=M`, `from`, `to` (ISO 8601 or Unix seconds) and
    /// `device` from a query's parameters.
    ///
    /// - Throws: `HTTPError` 400 whose message names the parameter and what is wrong with it.
    init(_ parameter: (String) -> String?) throws {
        func bad(_ message: String) -> HTTPError { HTTPError(.badRequest, message: message) }
        func numbers(_ text: String, count: Int) -> [Double]? {
            let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Double($0) }
            guard parts.count == count, parts.allSatisfy({ $0?.isFinite == true }) else { return nil }
            return parts.map { $0! }
        }
        func inRange(_ name: String, _ what: String, _ value: Double, _ limit: Double) throws {
            guard abs(value) <= limit else {
                throw bad("\(name): \(what) \(value) is out of range [-\(Int(limit)), \(Int(limit))]")
            }
        }
        let bbox = parameter("bbox").flatMap { $0.isEmpty ? nil : $0 }
        let near = parameter("near").flatMap { $0.isEmpty ? nil : $0 }
        let radius = parameter("radius").flatMap { $0.isEmpty ? nil : $0 }
        let area: PositionArea
        switch (bbox, near) {
        case (nil, nil):
            throw bad("an area is required: bbox=WEST,SOUTH,EAST,NORTH or near=LAT,LON&radius=METRES")
        case (.some, .some):
            throw bad("bbox and near: give one of them, not both")
        case (let text?, nil):
            guard radius == nil else { throw bad("radius: only with near=LAT,LON") }
            guard let v = numbers(text, count: 4) else {
                throw bad("bbox: '\(text)' is not four numbers WEST,SOUTH,EAST,NORTH (degrees)")
            }
            try inRange("bbox", "west", v[0], 180)
            try inRange("bbox", "south", v[1], 90)
            try inRange("bbox", "east", v[2], 180)
            try inRange("bbox", "north", v[3], 90)
            guard v[1] <= v[3] else {
                throw bad("bbox: south \(v[1]) is north of north \(v[3]) (the order is WEST,SOUTH,EAST,NORTH)")
            }
            guard v[0] <= v[2] else {
                throw bad(
                    "bbox: west \(v[0]) is east of east \(v[2]) (the order is WEST,SOUTH,EAST,NORTH; "
                        + "a box across the antimeridian is two queries)")
            }
            area = .box(west: v[0], south: v[1], east: v[2], north: v[3])
        case (nil, let text?):
            guard let v = numbers(text, count: 2) else { throw bad("near: '\(text)' is not LAT,LON (degrees)") }
            try inRange("near", "latitude", v[0], 90)
            try inRange("near", "longitude", v[1], 180)
            guard let radius else { throw bad("radius: required with near (metres, 1 to \(Int(Self.maxRadius)))") }
            guard let r = Double(radius), r.isFinite, (1...Self.maxRadius).contains(r) else {
                throw bad("radius: '\(radius)' is not a distance in metres from 1 to \(Int(Self.maxRadius))")
            }
            area = .near(latitude: v[0], longitude: v[1], radius: r)
        }
        let from = try QueryTime.parse("from", parameter("from")) ?? -.infinity
        let to = try QueryTime.parse("to", parameter("to")) ?? .infinity
        guard from <= to else { throw bad("from: \(parameter("from") ?? "") is after to: \(parameter("to") ?? "")") }
        let device = parameter("device").flatMap { $0.isEmpty ? nil : $0 }
        self.init(area: area, from: from, to: to, device: device)
    }
}
