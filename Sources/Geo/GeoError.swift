/// Geo's error: a shape that is not usable, what was wrong (``code``) and where in it.
///
/// It holds indices and counts only, never a coordinate (a position is personal data).
public struct GeoError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A polygon's ring has fewer than 3 distinct vertices (``GeoError/count``).
        public static let tooFewVertices = Code(rawValue: "too-few-vertices")
        /// A vertex is not a valid coordinate (``GeoError/index``).
        public static let invalidCoordinate = Code(rawValue: "invalid-coordinate")
        /// The ring crosses itself: edge ``GeoError/index`` crosses edge ``GeoError/otherIndex``.
        public static let selfIntersecting = Code(rawValue: "self-intersecting")
    }

    public var code: Code
    /// The 0-based vertex, or the first crossing edge, the problem is at.
    public var index: Int?
    /// The second crossing edge, for ``Code/selfIntersecting``.
    public var otherIndex: Int?
    /// How many vertices the ring had, for ``Code/tooFewVertices``.
    public var count: Int?

    public init(_ code: Code, index: Int? = nil, otherIndex: Int? = nil, count: Int? = nil) {
        self.code = code
        self.index = index
        self.otherIndex = otherIndex
        self.count = count
    }

    public var description: String {
        switch code {
        case .tooFewVertices: "a polygon needs at least 3 distinct vertices, got \(count ?? 0)"
        case .invalidCoordinate: "vertex \(index ?? 0) is not a valid coordinate (lat -90...90, lon -180...180)"
        case .selfIntersecting: "the polygon intersects itself (edge \(index ?? 0) crosses edge \(otherIndex ?? 0))"
        default: code.rawValue
        }
    }
}
