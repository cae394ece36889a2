import Synchronization

/// Faults the endpoint injects, for tests and demos: what a real server does on a bad day.
/// Set at start (`keeptrack serve --faults --fail-rate ...`) or at run time (`PUT /v1/faults`), and
/// only when the server was started with fault injection on
/// (``TrackServer/Configuration/faultInjection``, `keeptrack serve --faults`).
public struct Faults: Hashable, Sendable, Codable {
    /// Close every connection at once, without an answer (the server is there but refuses).
    public var refuse = false
    /// The share of requests (0...1) answered with `failStatus` without storing anything.
    public var failRate = 0.0
    /// Fail this many of the next requests (deterministic, for tests), before `failRate` applies.
    public var failNext = 0
    /// The status of failed requests, an error status (400-599). The default is 500.
    public var failStatus = 500
    /// A `Retry-After` (seconds) to send with failures, if any.
    public var retryAfter: Int?
    /// Seconds to wait before answering.
    public var delay = 0.0
    /// The share of requests (0...1) that are stored and then lose their connection in the
    /// middle of the answer: the client cannot know they were stored, and will send them again.
    public var dropRate = 0.0
    /// Drop this many of the next answers that way (deterministic, for tests).
    public var dropNext = 0
    /// Answer this many of the next requests `200 OK` with an HTML page and store nothing: a
    /// captive portal, a proxy's error page (deterministic, for tests).
    public var garbageNext = 0

    public init() {}

    /// The faults `keeptrack serve` takes as options.
    public init(refuse: Bool, failRate: Double, failStatus: Int, retryAfter: Int?, delay: Double, dropRate: Double) {
        (self.refuse, self.failRate, self.failStatus) = (refuse, failRate, failStatus)
        (self.retryAfter, self.delay, self.dropRate) = (retryAfter, delay, dropRate)
    }

    enum CodingKeys: String, CodingKey {
        case refuse, failRate, failNext, failStatus, retryAfter, delay, dropRate, dropNext, garbageNext
    }

    /// Missing keys keep their defaults: `{"failRate":0.3}` is enough.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        refuse = try c.decodeIfPresent(Bool.self, forKey: .refuse) ?? false
        failRate = try c.decodeIfPresent(Double.self, forKey: .failRate) ?? 0
        failNext = try c.decodeIfPresent(Int.self, forKey: .failNext) ?? 0
        failStatus = try c.decodeIfPresent(Int.self, forKey: .failStatus) ?? 500
        retryAfter = try c.decodeIfPresent(Int.self, forKey: .retryAfter)
        delay = try c.decodeIfPresent(Double.self, forKey: .delay) ?? 0
        dropRate = try c.decodeIfPresent(Double.self, forKey: .dropRate) ?? 0
        dropNext = try c.decodeIfPresent(Int.self, forKey: .dropNext) ?? 0
        garbageNext = try c.decodeIfPresent(Int.self, forKey: .garbageNext) ?? 0
    }

    /// Why these faults can't be used (``TrackServerError/Code/invalidFaults``, naming the key), or `nil`.
    public var problem: TrackServerError? {
        func invalid(_ field: String, _ why: String) -> TrackServerError {
            TrackServerError(.invalidFaults, "\(field) \(why)", field: field)
        }
        if !(0...1).contains(failRate) { return invalid("failRate", "must be between 0 and 1") }
        if !(0...1).contains(dropRate) { return invalid("dropRate", "must be between 0 and 1") }
        if !(400...599).contains(failStatus) { return invalid("failStatus", "must be an HTTP error status (400-599)") }
        if !(delay >= 0 && delay <= 600) { return invalid("delay", "must be between 0 and 600 seconds") }
        if failNext < 0 || dropNext < 0 || garbageNext < 0 {
            let field = failNext < 0 ? "failNext" : dropNext < 0 ? "dropNext" : "garbageNext"
            let why = "failNext, dropNext and garbageNext must be 0 or more"
            return TrackServerError(.invalidFaults, why, field: field)
        }
        return nil
    }

    /// What is wrong with a body that does not decode as faults, in a sentence naming the key (not
    /// Swift's description of the decoding error).
    static func decodingProblem(_ error: any Error) -> String {
        let whole = "not a JSON object of faults"
        switch error as? DecodingError {
        case .typeMismatch(let type, let c)?:
            guard let key = c.codingPath.last?.stringValue else { return whole }
            return "\(key) is not \(type == Bool.self ? "a boolean" : "a number")"
        case .valueNotFound(_, let c)?:
            guard let key = c.codingPath.last?.stringValue else { return whole }
            return "\(key) has no value"
        case .dataCorrupted(let c)?:
            guard let key = c.codingPath.last?.stringValue else { return whole }
            return "\(key) is out of range"
        default: return whole
        }
    }

    /// What to do with one request.
    enum Decision {
        case refuse
        case fail
        case drop
        case garbage
        case serve
    }

    mutating func decide() -> Decision {
        if refuse { return .refuse }
        if failNext > 0 {
            failNext -= 1
            return .fail
        }
        if failRate > 0 && Double.random(in: 0..<1) < failRate { return .fail }
        if garbageNext > 0 {
            garbageNext -= 1
            return .garbage
        }
        if dropNext > 0 {
            dropNext -= 1
            return .drop
        }
        if dropRate > 0 && Double.random(in: 0..<1) < dropRate { return .drop }
        return .serve
    }
}
