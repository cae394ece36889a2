import Geo

extension VisitDetector {
    /// Steps along the smoothed positions, and whether the device is at rest.
    ///
    /// A step joins two consecutive smoothed fixes. Between two fixes that both report a speed and are
    /// at most ``Configuration/speedIntegrationInterval`` apart, its distance is their mean speed times
    /// the time between them, its speed the faster of the two, and it stands still when the mean is
    /// below ``Configuration/restSpeed``; otherwise its distance is the distance between the two smoothed
    /// positions, and it stands still while the smoothed velocity at its end is below
    /// ``Configuration/smoothedRestSpeed``. Standing still adds no distance. Its state depends on the last
    /// smoothed fix only (and, at rest, on where the rest began).
    struct Motion: Sendable, Hashable, Codable {
        /// Where and when a rest began: the last smoothed fix the device moved to.
        struct Rest: Sendable, Hashable, Codable {
            var time: Double
            var coordinate: Coordinate
        }

        /// A step that moved: metres, and its speed in metres per second (at least its distance over its
        /// time).
        struct Move {
            var distance: Double
            var speed: Double
        }

        /// The last smoothed fix.
        var last: TrackSmoother.Point?
        /// Where the current rest began; `nil` while moving.
        var restSince: Rest?

        var isAtRest: Bool { restSince != nil }

        /// Takes the next smoothed fix: the step to it, if it moved.
        mutating func step(to point: TrackSmoother.Point, _ c: Configuration) -> Move? {
            guard let p = last else {
                last = point
                restSince = Rest(time: point.time, coordinate: point.coordinate)
                return nil
            }
            last = point
            let dt = point.time - p.time
            var move: Move?
            if p.reportedSpeed >= 0 && point.reportedSpeed >= 0 && dt <= c.speedIntegrationInterval {
                let speed = (p.reportedSpeed + point.reportedSpeed) / 2
                if speed >= c.restSpeed {
                    // Its speed is the faster end's: what the receiver said, and never below the mean.
                    move = Move(distance: speed * dt, speed: max(p.reportedSpeed, point.reportedSpeed))
                }
            } else if point.speed >= c.smoothedRestSpeed {
                let distance = Geodesy.distance(p.coordinate, point.coordinate)
                move = Move(distance: distance, speed: distance / dt)
            }
            if move == nil {
                if restSince == nil { restSince = Rest(time: p.time, coordinate: p.coordinate) }
            } else {
                restSince = nil
            }
            return move
        }
    }

    /// A stretch of the smoothed trail: where and when it began, where it has got to, and what its
    /// steps added up to.
    struct TripProgress: Sendable, Hashable, Codable {
        var start: Double
        var startCoordinate: Coordinate
        var end: Double
        var endCoordinate: Coordinate
        /// Metres of the steps that moved.
        var distance = 0.0
        /// The fastest step's speed, m/s.
        var maximumSpeed = 0.0

        init(at time: Double, _ coordinate: Coordinate) {
            start = time
            startCoordinate = coordinate
            end = time
            endCoordinate = coordinate
        }

        /// Goes on to a smoothed fix, by a step that moved or not.
        mutating func add(_ move: Motion.Move?, to point: TrackSmoother.Point) {
            if let move {
                distance += move.distance
                if move.speed > maximumSpeed { maximumSpeed = move.speed }
            }
            end = point.time
            endCoordinate = point.coordinate
        }

        /// The same, ending at `time` (where no step after it moved).
        func ended(at time: Double, _ coordinate: Coordinate) -> TripProgress {
            var t = self
            t.end = time
            t.endCoordinate = coordinate
            return t
        }

        /// The trip. Every step that added distance lies between its start and its end at most at the
        /// fastest step's speed, so the average is at most the maximum; the maximum is kept at least
        /// the average all the same (a trip begun at the last fix inside, after fixes not yet smoothed).
        var trip: Trip {
            let duration = end - start
            let average = duration > 0 ? distance / duration : 0
            return Trip(
                start: start, end: end, startCoordinate: startCoordinate, endCoordinate: endCoordinate,
                distance: distance, maximumSpeed: max(maximumSpeed, average))
        }
    }

    /// Takes the next smoothed fix: the step to it, the movement since the last rest, the trip under
    /// way, and the candidate stays' marks.
    mutating func follow(_ point: TrackSmoother.Point) {
        let move = motion.step(to: point, configuration)
        if motion.isAtRest || leg == nil {
            leg = TripProgress(at: point.time, point.coordinate)
        } else {
            leg!.add(move, to: point)
        }
        guard var t = trip, point.time > t.start else { return }
        if hasArrived && t.distance == 0 && motion.isAtRest {
            // Leaving, but not moving yet: the trip starts at the last fix at rest.
            t = TripProgress(at: point.time, point.coordinate)
        } else {
            t.add(move, to: point)
        }
        trip = t
        if !hasArrived { stay?.mark(t, at: point.time, restSince: motion.restSince) }
        outside?.mark(t, at: point.time, restSince: motion.restSince)
    }

    /// The trip that leaving `current` starts: the movement since the device was last at rest inside
    /// the visit, or, if it was not at rest there since its arrival, from the last fix inside.
    func departingTrip(from current: Stay) -> TripProgress {
        if let leg, leg.start >= current.arrival, leg.start <= current.lastInside { return leg }
        return TripProgress(at: current.lastInside, current.lastInsideCoordinate)
    }

    /// The visit left: it departs when the trip began (the last fix at rest), within its arrival and
    /// its last fix inside; a trip that began after the last fix inside (it had not moved yet) begins
    /// there instead.
    mutating func depart(_ current: Stay) -> Visit {
        guard var t = trip else { return current.visit(departure: current.lastInside) }
        if t.start < current.arrival || t.start > current.lastInside {
            t.start = current.lastInside
            t.startCoordinate = current.lastInsideCoordinate
            trip = t
        }
        return current.visit(departure: t.start)
    }
}
