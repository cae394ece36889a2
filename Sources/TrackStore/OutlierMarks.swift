import Synchronization

/// The outlier marks one run of a device's detector changed (``StoredStops``), told after its commit:
/// the locations it newly marked (an outlier's reason, or ``StoredStops/pendingMark``) and those whose
/// mark it cleared (a held point the next one showed was fine, or a run again from a checkpoint that
/// judged otherwise). What the live stream publishes as
/// `{"type":"event","device":ID,"event":{"kind":"outliers",...}}`: a live map takes the marked points
/// out of its line and puts the cleared ones back.
public struct OutlierMarks: Hashable, Sendable {
    /// One stored location, named by its time and position.
    public struct Point: Hashable, Sendable {
        /// Seconds since 1970.
        public var time: Double
        public var latitude: Double
        public var longitude: Double
        /// Its mark now: an ``LocationService/OutlierFilter/Reason``'s raw value or
        /// ``StoredStops/pendingMark``; `nil` once cleared.
        public var mark: String?

        public init(time: Double, latitude: Double, longitude: Double, mark: String?) {
            (self.time, self.latitude, self.longitude, self.mark) = (time, latitude, longitude, mark)
        }
    }

    /// The device.
    public var device: String
    /// The time of the last point the run took (the one that decided the marks), in seconds since 1970.
    public var time: Double
    /// The locations newly marked, in time order.
    public var marked: [Point]
    /// The locations no longer marked, in time order.
    public var cleared: [Point]

    public init(device: String, time: Double, marked: [Point], cleared: [Point]) {
        self.device = device
        self.time = time
        self.marked = marked
        self.cleared = cleared
    }

    /// What a store's run changed, as it goes (the rows its updates touched, with their marks): a
    /// point cleared and marked again the same is no change.
    public struct Changes: Sendable {
        struct Key: Hashable {
            var time: Double
            var latitude: Double
            var longitude: Double
        }

        /// The mark each point touched had before the run (`.some(nil)`: none, or another than its
        /// new one).
        var before: [Key: String?] = [:]
        /// The mark each point touched has now.
        var after: [Key: String?] = [:]

        public init() {}

        /// Whether the run touched no mark.
        public var isEmpty: Bool { after.isEmpty }

        /// The point's mark, `was`, was cleared.
        public mutating func cleared(time: Double, latitude: Double, longitude: Double, was: String) {
            let key = Key(time: time, latitude: latitude, longitude: longitude)
            if before[key] == nil { before[key] = .some(was) }
            after[key] = .some(nil)
        }

        /// The point was marked `mark` (it had another mark, or none).
        public mutating func marked(time: Double, latitude: Double, longitude: Double, as mark: String) {
            let key = Key(time: time, latitude: latitude, longitude: longitude)
            if before[key] == nil { before[key] = .some(nil) }
            after[key] = .some(mark)
        }

        /// The changes as ``OutlierMarks`` of `device` (`nil`: none), decided by the point at `time`.
        public func marks(device: String, time: Double) -> OutlierMarks? {
            var marked: [Point] = []
            var cleared: [Point] = []
            for (key, now) in after {
                let was = before[key] ?? nil
                let point = Point(time: key.time, latitude: key.latitude, longitude: key.longitude, mark: now)
                if let now, now != was {
                    marked.append(point)
                } else if now == nil, was != nil {
                    cleared.append(point)
                }
            }
            guard !marked.isEmpty || !cleared.isEmpty else { return nil }
            let order = { (a: Point, b: Point) in
                (a.time, a.latitude, a.longitude) < (b.time, b.latitude, b.longitude)
            }
            return OutlierMarks(
                device: device, time: time, marked: marked.sorted(by: order), cleared: cleared.sorted(by: order))
        }
    }
}

/// Where a store tells the outlier marks its detectors changed, run by run after each commit (this
/// process's runs only, as ``StopEventFeed``). A device's first computing of its whole history (a
/// store upgraded from before marks were kept) is not told.
///
/// Handlers run on the thread that committed: they must return quickly and never wait.
public typealias OutlierMarkFeed = Feed<OutlierMarks>
