import Geo

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Smoothed positions along a trail: a constant-velocity Kalman filter weighted by each fix's
/// accuracy, with a Rauch–Tung–Striebel smoother over a short window of fixes before and after each
/// one. A value with no I/O and no clock: ``add(_:_:)`` takes one fix at a time and gives the
/// smoothed position of the fix ``Configuration/lag`` fixes back (or of every fix waiting longer
/// than ``Configuration/maximumWait`` seconds); ``finish(_:)`` gives the ones still waiting.
///
/// The window is fixed: a fix's smoothed position uses the ``Configuration/history`` fixes before it
/// and the ``Configuration/lag`` fixes after it, the filter starting afresh at the window's first
/// fix. So the state is at most `history + lag + 1` fixes however long the trail (a 10-hour drive at
/// 10 Hz holds nine fixes), a smoothed position depends on nothing older than its window, and two
/// smoothers given the same last fixes are in the same state (the endpoint compares the visit
/// detector's stored states). On the project's fixtures a window of four fixes either side takes
/// most of what a smoother over the whole trail takes off a 1 Hz trail's length (a walk's length
/// measured along raw fixes is 30 to 45 % too long, along these positions 1 to 4 %; see
/// `docs/visits.md`).
///
/// The model: east and north each a position and a velocity, with white acceleration noise of
/// spectral density ``Configuration/acceleration``; a fix measures the position with a standard
/// deviation of its horizontal accuracy / √2 on each axis (the project's convention for a receiver's
/// `hAcc`). Both axes share one covariance (the same model and the same measurement noise), so a
/// step costs a few dozen multiplications. Positions are on a local plane about the window's first
/// fix (equirectangular: within a window's metres it differs from the ellipsoid by far less than the
/// noise).
public struct TrackSmoother: Sendable, Hashable, Codable {
    /// The smoother's settings.
    public struct Configuration: Sendable, Hashable, Codable {
        /// Fixes after a fix that its smoothed position waits for. The default is 4.
        public var lag = 4
        /// Fixes before a fix that its smoothed position uses. The default is 4.
        public var history = 4
        /// Seconds a fix waits at most for the fixes after it (a sparse trail gives its positions
        /// without waiting minutes for the next fixes). The default is 10.
        public var maximumWait: Double = 10
        /// The motion model's acceleration noise, the spectral density of its white acceleration in
        /// m²/s³. The default is 0.5 (walking and city driving alike: see `docs/visits.md`).
        public var acceleration: Double = 0.5
        /// The accuracy in metres assumed for a fix that has none. The default is 20.
        public var unknownAccuracy: Double = 20
        /// When set, a fix that reports a speed, as does the fix before it at most this many seconds
        /// earlier, is given as it is: its own position, its reported speed, no course (-1). The visit
        /// detector measures such steps by the reported speeds and needs no smoothing there (it sets
        /// this to its ``VisitDetector/Configuration/speedIntegrationInterval``). The default is `nil`:
        /// every fix smoothed.
        public var unsmoothedWithSpeeds: Double?

        /// The default configuration.
        public init() {}
    }

    /// A fix's smoothed position, and what the fix itself said.
    public struct Point: Hashable, Sendable, Codable {
        /// The fix's time, in seconds since 1970.
        public var time: Double
        /// The smoothed position.
        public var coordinate: Coordinate
        /// The smoothed velocity's magnitude, in m/s.
        public var speed: Double
        /// The smoothed velocity's direction, in degrees clockwise from north (0..<360); -1 for a fix
        /// given as it is (``Configuration/unsmoothedWithSpeeds``).
        public var course: Double
        /// The speed the fix reported (a receiver's Doppler speed), in m/s; negative when it had none.
        public var reportedSpeed: Double
        /// The fix's horizontal accuracy in metres (``Configuration/unknownAccuracy`` when it had none).
        public var horizontalAccuracy: Double

        /// Creates a point.
        public init(
            time: Double, coordinate: Coordinate, speed: Double, course: Double, reportedSpeed: Double,
            horizontalAccuracy: Double
        ) {
            self.time = time
            self.coordinate = coordinate
            self.speed = speed
            self.course = course
            self.reportedSpeed = reportedSpeed
            self.horizontalAccuracy = horizontalAccuracy
        }
    }

    /// One fix of the window.
    struct Fix: Sendable, Hashable, Codable {
        var time: Double
        var latitude: Double
        var longitude: Double
        var accuracy: Double
        var speed: Double

        enum CodingKeys: String, CodingKey {
            case time = "t"
            case latitude = "lat"
            case longitude = "lon"
            case accuracy = "acc"
            case speed = "v"
        }
    }

    /// A filtered state on the plane: position and velocity on both axes (east, north), their shared covariance
    /// (position, cross, velocity), and that covariance predicted to the next fix.
    struct Step {
        var position, velocity: SIMD2<Double>
        var p00, p01, p11: Double
        var a00, a01, a11: Double
    }

    /// The settings; a change holds from the next fix.
    public var configuration: Configuration
    /// The window: fixes already given (up to ``Configuration/history``), then the waiting ones.
    var fixes: [Fix] = []
    /// The index in ``fixes`` of the first fix whose smoothed position is not given yet.
    var next = 0

    static let metresPerDegreeLatitude = Geodesy.meanRadius * .pi / 180
    /// The velocity's prior standard deviation at a window's first fix, m/s: anything a device does.
    static let initialVelocityVariance = 30.0 * 30.0

    /// Creates a smoother with nothing seen.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Whether no fix waits for its smoothed position.
    public var isEmpty: Bool { next == fixes.count }

    /// Takes the next fix and gives the smoothed positions it completes, oldest first (usually one:
    /// the fix ``Configuration/lag`` fixes back). A fix without a valid coordinate or a time after
    /// the last fix's is ignored.
    ///
    /// - Complexity: O(`history` + `lag`) per position given; no allocation once the window is full.
    public mutating func add(_ sample: VisitDetector.Sample, _ emit: (Point) -> Void) {
        guard append(sample) else { return }
        while let point = nextCompleted() { emit(point) }
    }

    /// Takes the next fix, as ``add(_:_:)`` does, without giving the positions it completes: take them
    /// with ``nextCompleted()`` until it gives `nil`, before the next fix (what a caller does that
    /// changes its own state with each position, the smoother being part of it). Returns false for a
    /// fix ignored.
    @discardableResult
    public mutating func append(_ sample: VisitDetector.Sample) -> Bool {
        guard sample.coordinate.isValid, sample.time.isFinite, fixes.last.map({ sample.time > $0.time }) ?? true
        else { return false }
        let accuracy = sample.horizontalAccuracy >= 0 ? sample.horizontalAccuracy : configuration.unknownAccuracy
        if fixes.isEmpty { fixes.reserveCapacity(configuration.history + configuration.lag + 2) }
        fixes.append(
            Fix(
                time: sample.time, latitude: sample.coordinate.latitude, longitude: sample.coordinate.longitude,
                accuracy: accuracy, speed: sample.speed))
        return true
    }

    /// The next smoothed position the fixes taken complete (the fix ``Configuration/lag`` fixes back
    /// from the newest, or one waiting longer than ``Configuration/maximumWait``), oldest first; `nil`
    /// when none is complete (the window is trimmed then).
    public mutating func nextCompleted() -> Point? {
        guard let newest = fixes.last?.time, next < fixes.count,
            fixes.count - 1 - next >= configuration.lag || newest - fixes[next].time > configuration.maximumWait
        else {
            trim()
            return nil
        }
        defer { next += 1 }
        return smoothed(at: next)
    }

    /// Gives the smoothed positions of the fixes still waiting (the input is over, or pauses), oldest
    /// first. The window stays: fixes added afterwards are smoothed with the ones before.
    public mutating func finish(_ emit: (Point) -> Void) {
        while next < fixes.count {
            emit(smoothed(at: next))
            next += 1
        }
        trim()
    }

    /// Forgets every fix (after a hole long enough that nothing before it should shape what follows).
    public mutating func reset() {
        fixes.removeAll(keepingCapacity: true)
        next = 0
    }

    /// The smoothed positions of `samples` (in time order), one per fix taken.
    public static func smooth(
        _ samples: some Sequence<VisitDetector.Sample>, configuration: Configuration = Configuration()
    ) -> [Point] {
        var smoother = TrackSmoother(configuration: configuration)
        var out: [Point] = []
        for s in samples { smoother.add(s) { out.append($0) } }
        smoother.finish { out.append($0) }
        return out
    }

    /// Drops the fixes older than the window's history.
    mutating func trim() {
        let extra = next - configuration.history
        if extra > 0 {
            fixes.removeFirst(extra)
            next -= extra
        }
    }

    /// The smoothed position of the fix at `index`: the filter forward over the whole window, then the
    /// smoother back to the fix.
    ///
    /// Both axes go together (a `SIMD2`: east, north: the same operations on each as one on both),
    /// each forward step keeps the covariance it predicted (the backward step to it needs the same),
    /// and each backward step divides once: about 12 filter and smoother steps a fix, with no call
    /// and no allocation (the steps are on the stack).
    func smoothed(at index: Int) -> Point {
        let fix = fixes[index]
        if let interval = configuration.unsmoothedWithSpeeds, index > 0, fix.speed >= 0, fixes[index - 1].speed >= 0,
            fix.time - fixes[index - 1].time <= interval
        {
            return Point(
                time: fix.time, coordinate: Coordinate(latitude: fix.latitude, longitude: fix.longitude),
                speed: fix.speed, course: -1, reportedSpeed: fix.speed, horizontalAccuracy: fix.accuracy)
        }
        let n = fixes.count
        let q = configuration.acceleration
        return fixes.withUnsafeBufferPointer { window in
            let origin = window[0]
            let mLat = Self.metresPerDegreeLatitude
            let mLon = mLat * cos(origin.latitude * .pi / 180)
            let degrees = SIMD2(origin.longitude, origin.latitude)
            let metres = SIMD2(mLon, mLat)
            // A fix on the plane about the window's first fix (east, north), and its variance.
            @inline(__always) func plane(_ f: Fix) -> SIMD2<Double> {
                var d = SIMD2(f.longitude, f.latitude) - degrees
                if d.x > 180 { d.x -= 360 } else if d.x < -180 { d.x += 360 }
                return d * metres
            }
            @inline(__always) func variance(_ f: Fix) -> Double { max(f.accuracy, 1) * max(f.accuracy, 1) / 2 }

            return withUnsafeTemporaryAllocation(of: Step.self, capacity: n - index) { steps in
                // Forward: the filtered state at each fix from `index` on, with the covariance predicted
                // to the fix after it (filled by the next step).
                var position = SIMD2<Double>.zero
                var velocity = SIMD2<Double>.zero
                var p00 = variance(origin)
                var p01 = 0.0
                var p11 = Self.initialVelocityVariance
                if index == 0 {
                    steps[0] = Step(
                        position: position, velocity: velocity, p00: p00, p01: p01, p11: p11, a00: 0, a01: 0, a11: 0)
                }
                var k = 1
                while k < n {
                    let f = window[k]
                    let dt = f.time - window[k - 1].time
                    let a00 = p00 + dt * (2 * p01 + dt * p11) + q * dt * dt * dt / 3
                    let a01 = p01 + dt * p11 + q * dt * dt / 2
                    let a11 = p11 + q * dt
                    if k > index {
                        let before = k - 1 - index
                        (steps[before].a00, steps[before].a01, steps[before].a11) = (a00, a01, a11)
                    }
                    let g = 1 / (a00 + variance(f))
                    let k0 = a00 * g
                    let k1 = a01 * g
                    let predicted = position + dt * velocity
                    let innovation = plane(f) - predicted
                    position = predicted + k0 * innovation
                    velocity = velocity + k1 * innovation
                    (p00, p01, p11) = (a00 * (1 - k0), a01 * (1 - k0), a11 - k1 * a01)
                    if k >= index {
                        steps[k - index] = Step(
                            position: position, velocity: velocity, p00: p00, p01: p01, p11: p11, a00: 0, a01: 0,
                            a11: 0)
                    }
                    k += 1
                }
                // Backward to `index`.
                k = n - 2
                while k >= index {
                    let f = steps[k - index]
                    let dt = window[k + 1].time - window[k].time
                    let (a00, a01, a11) = (f.a00, f.a01, f.a11)
                    let inverse = 1 / (a00 * a11 - a01 * a01)
                    // The gain: the covariance times the transition's transpose, over the prediction's.
                    let b00 = f.p00 + dt * f.p01
                    let b10 = f.p01 + dt * f.p11
                    let c00 = (b00 * a11 - f.p01 * a01) * inverse
                    let c01 = (f.p01 * a00 - b00 * a01) * inverse
                    let c10 = (b10 * a11 - f.p11 * a01) * inverse
                    let c11 = (f.p11 * a00 - b10 * a01) * inverse
                    let d = position - (f.position + dt * f.velocity)
                    let dv = velocity - f.velocity
                    position = f.position + c00 * d + c01 * dv
                    velocity = f.velocity + c10 * d + c11 * dv
                    k -= 1
                }
                var course = atan2(velocity.x, velocity.y) * 180 / .pi
                if course < 0 { course += 360 }
                return Point(
                    time: fix.time,
                    coordinate: Coordinate(
                        latitude: origin.latitude + position.y / mLat,
                        longitude: Geodesy.normalizeLongitude(origin.longitude + position.x / mLon)),
                    speed: (velocity * velocity).sum().squareRoot(), course: course, reportedSpeed: fix.speed,
                    horizontalAccuracy: fix.accuracy)
            }
        }
    }
}
