import Geo
import Synchronization

/// What a ``LocationManager`` delivers.
public struct LocationManagerConfiguration: Sendable {
    /// Standard updates; `nil` turns them off. The default is on with default settings.
    public var standardUpdates: StandardUpdateFilter.Configuration? = .init()
    /// Significant-change monitoring (500 m / 5 min); `nil` (the default) turns it off.
    public var significantChanges: SignificantChangeMonitor?
    /// Visit monitoring (CLLocationManager's `startMonitoringVisits`): visits and the trips between
    /// them; `nil` (the default) turns it off. It takes the fixes significant changes and regions
    /// take: every fix with a position and an accuracy, while suspended too, except those standard
    /// updates reject as stale or as an impossible jump (the detector's own outlier filter judges the
    /// rest: ``VisitDetector/add(_:_:)``). At the end of the input an open visit stays open: the
    /// device is still there.
    public var visits: VisitDetector.Configuration?
    /// Seconds without a usable fix before a location-unknown error. The default is 30.
    public var locationUnknownAfter: Double = 30

    public init() {}
}

/// The CLLocationManager of Linux: turns any ``FixSource`` into ``LocationEvent``s.
///
/// The decisions live in value types (``StandardUpdateFilter``, ``SignificantChangeMonitor``,
/// ``RegionMonitor``, ``VisitDetector``); the manager owns the stream and the clock. It reads the source as its
/// ``events`` are consumed (no buffering, no dropped fixes in a fast replay) and asks `now` for the
/// current time (seconds since 1970): the wall clock when live, the log's clock in a replay, a
/// manual clock in tests.
///
/// Besides locations and region events it reports, like CoreLocation, errors as events:
/// ``LocationError/Code/locationUnknown`` once no usable fix arrived for
/// ``LocationManagerConfiguration/locationUnknownAfter`` seconds (again after the next usable one; a fix standard
/// updates reject as stale is none, and the message says the fixes were stale), and
/// ``LocationError/Code/sourceUnavailable`` when the source reports a loss or an error.
///
/// It is driven by calls, like CLLocationManager: ``startUpdatingLocation()`` and
/// ``stopUpdatingLocation()``, and ``setSuspended(_:)`` for the app's suspension (what iOS does to a
/// suspended app's updates). Each is safe from any thread while the events are read, and holds from
/// the next fix decided.
public final class LocationManager<Source: FixSource>: Sendable {
    public let source: Source
    public let configuration: LocationManagerConfiguration
    /// The monitored regions between fixes; a fix's decisions take them out and put them back, so
    /// ``regionState(for:)`` can answer from any thread without copying them.
    let regions: Mutex<RegionMonitor>
    let clock: any EpochClock
    let locationSource: Location.Source
    /// Whether standard updates run and whether the app is suspended: set by the calls, read before
    /// each fix is decided.
    private let switches: Mutex<Switches>
    let rejected: (@Sendable (RejectReason) -> Void)?

    /// - Parameters:
    ///   - source: where fixes come from.
    ///   - configuration: which updates to deliver.
    ///   - regions: the regions to monitor (with their states).
    ///   - locationSource: how delivered locations are labelled.
    ///   - updatingLocation: whether standard updates run from the start (until
    ///     ``stopUpdatingLocation()``). The default is `true`.
    ///   - rejected: told why each fix standard updates did not take was rejected (for counting).
    ///   - clock: the time fixes are judged by (staleness, the significant-change rule).
    public init(
        source: Source, configuration: LocationManagerConfiguration = LocationManagerConfiguration(),
        regions: RegionMonitor = RegionMonitor(), locationSource: Location.Source = .other,
        updatingLocation: Bool = true,
        rejected: (@Sendable (RejectReason) -> Void)? = nil, clock: any EpochClock
    ) {
        self.source = source
        self.configuration = configuration
        self.regions = Mutex(regions)
        self.locationSource = locationSource
        self.switches = Mutex(Switches(updating: updatingLocation))
        self.rejected = rejected
        self.clock = clock
    }

    struct Switches {
        var updating: Bool
        var suspended = false
    }

    /// Starts standard updates (CLLocationManager's `startUpdatingLocation`); they run from the start
    /// unless the manager was made with `updatingLocation: false`.
    public func startUpdatingLocation() { switches.withLock { $0.updating = true } }

    /// Stops standard updates; significant changes and regions go on.
    public func stopUpdatingLocation() { switches.withLock { $0.updating = false } }

    /// Whether standard updates run.
    public var isUpdatingLocation: Bool { switches.withLock { $0.updating } }

    /// Says whether the app is suspended: while it is, standard updates deliver nothing, and
    /// significant changes and regions still run on the fixes given (the low-rate sampling that can
    /// wake it). The app is not suspended until this says so.
    public func setSuspended(_ suspended: Bool) { switches.withLock { $0.suspended = suspended } }

    /// Whether the app is suspended (``setSuspended(_:)``).
    public var isSuspended: Bool { switches.withLock { $0.suspended } }

    /// The current state of a monitored region (``RegionState/unknown`` before its first evidence),
    /// like CLLocationManager's `requestState(for:)`; `nil` when no region has that id. Safe from any
    /// thread while the events are read.
    public func regionState(for id: String) -> RegionState? {
        regions.withLock { $0.contains(id) ? $0.state(for: id) : nil }
    }

    /// Reads the monitored regions and their states as they are now (between two fixes).
    public func withRegions<R: Sendable>(_ body: (borrowing RegionMonitor) -> R) -> R {
        regions.withLock { body($0) }
    }

    /// The events, as they happen.
    public var events: Events { Events(manager: self) }

    /// The event stream: pulls the source as events are consumed.
    public struct Events: AsyncSequence, Sendable {
        public typealias Element = LocationEvent
        public typealias Failure = Never
        let manager: LocationManager

        public func makeAsyncIterator() -> Iterator {
            Iterator(manager: manager, upstream: manager.source.makeAsyncIterator())
        }

        public struct Iterator: AsyncIteratorProtocol {
            public typealias Element = LocationEvent
            public typealias Failure = Never

            let manager: LocationManager
            var upstream: Source.AsyncIterator
            var state: Decisions
            var pending: [LocationEvent] = []
            var head = 0

            init(manager: LocationManager, upstream: Source.AsyncIterator) {
                self.manager = manager
                self.upstream = upstream
                self.state = Decisions(
                    configuration: manager.configuration, regions: RegionMonitor(),
                    source: manager.locationSource)
            }

            /// Whether more events of the same fix are decided and wait to be returned: the last event
            /// of a fix is returned with this `false`. An owner that commits a fix's records together
            /// before delivering any of them (the tracker's outbox) reads events until then.
            public var fixHasMoreEvents: Bool { head < pending.count }

            /// The regions and their states as they are now (for persistence). A copy: prefer
            /// ``LocationManager/withRegions(_:)`` for a large set.
            public var regionMonitor: RegionMonitor { manager.regions.withLock { $0 } }

            public mutating func next() async -> LocationEvent? {
                while true {
                    if head < pending.count {
                        defer {
                            head += 1
                            if head == pending.count {
                                pending.removeAll(keepingCapacity: true)
                                head = 0
                            }
                        }
                        return pending[head]
                    }
                    guard let element = await upstream.next(isolation: nil) else { return nil }
                    let switches = manager.switches.withLock { $0 }
                    state.isSuspended = switches.suspended
                    state.standardUpdatesActive = switches.updating
                    let now = manager.clock.now.secondsSince1970
                    pending = manager.regions.withLock { regions in
                        swap(&regions, &state.regions)
                        defer { swap(&regions, &state.regions) }
                        return state.handle(element, now: now)
                    }
                    if let rejected = manager.rejected {
                        for reason in state.lastRejections { rejected(reason) }
                    }
                }
            }
        }
    }
}

/// The manager's decision state: all pure value types, one element at a time.
public struct Decisions: Sendable {
    public var standard: StandardUpdateFilter?
    public var significant: SignificantChangeMonitor?
    public var regions: RegionMonitor
    /// Visits and trips, when monitored (``LocationManagerConfiguration/visits``).
    public var visits: VisitDetector?
    public let locationUnknownAfter: Double
    /// Whether the app is suspended: standard updates stop (nothing is delivered to a suspended
    /// app), while significant changes, regions and visits still run on the fixes given — the low-rate
    /// sampling that can wake it. The default is `false`.
    public var isSuspended = false
    /// Whether standard updates run (CLLocationManager's `startUpdatingLocation`). The default is
    /// `true`.
    public var standardUpdatesActive = true
    /// Why standard updates did not take the fixes of the last ``handle(_:now:)`` (for counting).
    public private(set) var lastRejections: [RejectReason] = []
    let source: Location.Source
    var lastUsable: Double?
    var firstSeen: Double?
    var reportedUnknown = false

    public init(configuration: LocationManagerConfiguration, regions: RegionMonitor, source: Location.Source = .other) {
        standard = configuration.standardUpdates.map { StandardUpdateFilter(configuration: $0) }
        significant = configuration.significantChanges
        self.regions = regions
        visits = configuration.visits.map { VisitDetector(configuration: $0) }
        locationUnknownAfter = configuration.locationUnknownAfter
        self.source = source
    }

    /// Location unknown, once, when no usable fix came for ``locationUnknownAfter`` seconds (again
    /// only after a usable one); `why` ends the message.
    mutating func locationUnknown(now: Double, why: @autoclosure () -> String = "") -> [LocationEvent] {
        let quiet = now - (lastUsable ?? firstSeen ?? now)
        guard !reportedUnknown, quiet >= locationUnknownAfter else { return [] }
        reportedUnknown = true
        return [.error(LocationError(.locationUnknown, "no usable fix for \(Int(quiet)) s" + why()))]
    }

    /// The events one source element causes at time `now`.
    public mutating func handle(_ element: SourceElement, now: Double) -> [LocationEvent] {
        // Only this element's: a source event after a refused fix must not count the fix again.
        lastRejections.removeAll(keepingCapacity: true)
        switch element {
        case .event(let e):
            switch e.kind {
            case .disconnected, .error:
                return [.error(LocationError(.sourceUnavailable, e.message, underlying: e.error))]
            default:
                return []
            }
        case .fix(let fix):
            var out: [LocationEvent] = []
            if firstSeen == nil { firstSeen = now }
            guard let location = Location(fix, source: source), location.horizontalAccuracy >= 0 else {
                lastRejections.append(
                    !fix.hasPosition ? .noPosition : fix.time?.secondsSince1970 == nil ? .noDate : .noAccuracy)
                return locationUnknown(now: now)
            }
            var plausible = true
            var staleBy: Double?
            if standard != nil && !isSuspended && standardUpdatesActive {
                for outcome in standard!.process(location, now: now) {
                    switch outcome {
                    case .deliver(let l): out.append(.location(l))
                    case .paused(let l): out.append(.paused(l))
                    case .resumed(let l): out.append(.resumed(l))
                    case .reject(let reason):
                        lastRejections.append(reason)
                        if case .stale(let age) = reason { staleBy = age }
                        if case .inaccurate = reason {} else { plausible = false }
                    case .suppress: break
                    }
                }
            }
            if let age = staleBy {
                // A stale fix is no usable fix: a receiver whose times lag the clock (or a system
                // clock that is wrong) would otherwise stop every location without a word.
                return out
                    + locationUnknown(
                        now: now,
                        why: ": every fix is stale, the last \(Int(age.rounded())) s "
                            + "older than the clock (is the system clock right?)")
            }
            lastUsable = now
            reportedUnknown = false
            // Outliers and stale fixes feed neither significant changes, regions nor visits.
            guard plausible else { return out }
            if significant != nil, let l = significant!.process(location) { out.append(.significantChange(l)) }
            for e in regions.process(location) { out.append(.region(e, at: location)) }
            // Moved out and back (no copy of the detector's state a fix).
            if var detector = visits.take() {
                // Through the detector's outlier filter: a fix that jumped away and back is left out
                // (it is judged, and the fix before it decided, when the next one comes).
                detector.add(VisitDetector.Sample(location)) { decisions in
                    for decision in decisions {
                        switch decision {
                        case .arrival(let v), .departure(let v): out.append(.visit(v, at: location))
                        case .trip(let t): out.append(.trip(t, at: location))
                        }
                    }
                }
                visits = detector
            }
            return out
        }
    }
}

/// The delegate-style interface, for callers who prefer callbacks to an `AsyncSequence`, like
/// CLLocationManagerDelegate. Every method has an empty default.
public protocol LocationManagerDelegate: AnyObject {
    func didUpdateLocation(_ location: Location)
    func didChangeSignificantly(_ location: Location)
    func didEnterRegion(_ id: String, at time: Double)
    func didExitRegion(_ id: String, at time: Double)
    func didDwellInRegion(_ id: String, at time: Double)
    func didDetermineState(_ state: RegionState, forRegion id: String)
    func didPauseUpdates(at location: Location)
    func didResumeUpdates(at location: Location)
    func didFail(with error: LocationError)
    func didVisit(_ visit: Visit)
    func didEndTrip(_ trip: Trip)
}

extension LocationManagerDelegate {
    public func didUpdateLocation(_ location: Location) {}
    public func didChangeSignificantly(_ location: Location) {}
    public func didEnterRegion(_ id: String, at time: Double) {}
    public func didExitRegion(_ id: String, at time: Double) {}
    public func didDwellInRegion(_ id: String, at time: Double) {}
    public func didDetermineState(_ state: RegionState, forRegion id: String) {}
    public func didPauseUpdates(at location: Location) {}
    public func didResumeUpdates(at location: Location) {}
    public func didFail(with error: LocationError) {}
    public func didVisit(_ visit: Visit) {}
    public func didEndTrip(_ trip: Trip) {}
}

extension LocationManager {
    /// Consumes ``events`` until the source ends, calling `delegate` for each.
    public func run(delegate: some LocationManagerDelegate) async {
        for await event in events {
            switch event {
            case .location(let l): delegate.didUpdateLocation(l)
            case .significantChange(let l): delegate.didChangeSignificantly(l)
            case .paused(let l): delegate.didPauseUpdates(at: l)
            case .resumed(let l): delegate.didResumeUpdates(at: l)
            case .error(let e): delegate.didFail(with: e)
            case .visit(let v, _): delegate.didVisit(v)
            case .trip(let t, _): delegate.didEndTrip(t)
            case .region(let e, _):
                switch e {
                case .enter(let id, let t): delegate.didEnterRegion(id, at: t)
                case .exit(let id, let t): delegate.didExitRegion(id, at: t)
                case .dwell(let id, let t): delegate.didDwellInRegion(id, at: t)
                case .state(let id, let s): delegate.didDetermineState(s, forRegion: id)
                }
            }
        }
    }
}
