import Lifecycle
import LocationService
import Upload

extension Tracker {
    /// Every setting of a tracker, location service, lifecycle and upload, in one value. The
    /// command line and the configuration file both build one.
    public struct Configuration: Sendable {
        // MARK: Location service

        /// Standard updates (distance filter, desired accuracy, pause when stationary); `nil` turns
        /// them off. The default is on with default settings.
        public var standardUpdates: StandardUpdateFilter.Configuration? = .init()
        /// Whether standard updates run from the start (`startUpdatingLocation()` and
        /// `stopUpdatingLocation()` switch them later). The default is `true`.
        public var updatesLocationAtStart = true
        /// Significant-change monitoring (500 m / 5 min); `nil` (the default) turns it off.
        public var significantChanges: SignificantChangeMonitor?
        /// Visit monitoring (visits and the trips between them, see
        /// `LocationManagerConfiguration.visits`); `nil` (the default) turns it off. Like significant
        /// changes, a visit's arrival or departure wakes a suspended app.
        public var visits: VisitDetector.Configuration?
        /// Seconds without a usable fix before a location-unknown error. The default is 30.
        public var locationUnknownAfter: Double = 30
        /// While fixes are held back because the device does not move (the distance filter, a pause
        /// at a stop), the latest location is recorded again this often (seconds, more than 0), at
        /// the time on the tracker's clock: a ``TrackerEvent/heartbeat(_:)`` and a record of kind
        /// `heartbeat` (see ``Heartbeat``). Not while suspended. The default is `nil` (off).
        public var heartbeat: Double?
        /// The regions to monitor, with their states. The default is none.
        public var regions = RegionMonitor()
        /// Regions that could not be monitored (each a `LocationError` of code `invalid-region`
        /// naming the region), reported as `region-monitoring-failure` errors at start (like
        /// CoreLocation's monitoringDidFail). The default is none.
        public var regionFailures: [LocationError] = []
        /// Where the regions come from and their states go after each transition, across runs; when
        /// set, ``regions`` is read from it at start. The default is none.
        public var regionStore: RegionStore?

        // MARK: Lifecycle

        /// The background-time policy. The default is iOS 7's (180 s).
        public var policy: BackgroundPolicy = .ios7
        /// The declared background modes. The default is `location`.
        public var modes: BackgroundModes = .location
        /// Start in the background: the budget counts from the start. The default is `false`.
        public var startInBackground = false
        /// While suspended, take one fix this often (seconds) for significant changes, regions and
        /// visits.
        /// The default is 60.
        public var sampleInterval: Double = 60
        /// Launch the app at the first fix rather than when the tracker starts: a replay on the log's
        /// clock, which only starts with that fix. The default is `false`.
        public var launchAtFirstFix = false
        /// Process the lifecycle's deadlines between fixes with a timer on the tracker's clock (live
        /// tracking). Off, deadlines pass as the clock passes them with the fixes (a replay on log
        /// time, a simulation). The default is `true`.
        public var deadlineTimer = true

        // MARK: Upload

        /// The outbox and the uploader; `nil` (the default) records and uploads nothing.
        public var upload: UploadSettings?

        public init() {}

        /// The location manager's part: standard updates, significant changes, visits and the
        /// location-unknown delay (`LocationSettings.configuration` builds one from options).
        public var locationManager: LocationManagerConfiguration {
            get {
                var c = LocationManagerConfiguration()
                (c.standardUpdates, c.significantChanges, c.visits, c.locationUnknownAfter) =
                    (standardUpdates, significantChanges, visits, locationUnknownAfter)
                return c
            }
            set {
                (standardUpdates, significantChanges, visits, locationUnknownAfter) =
                    (
                        newValue.standardUpdates, newValue.significantChanges, newValue.visits,
                        newValue.locationUnknownAfter
                    )
            }
        }
    }

    /// Where and how the trail is uploaded.
    public struct UploadSettings: Sendable {
        /// The outbox's SQLite file.
        public var outboxPath: String
        /// The outbox's device id and caps. The default is the outbox's default.
        public var outbox = Outbox.Configuration()
        /// The endpoint, format, credentials, batching and backoff. An embedded endpoint's address
        /// is known only once it listens: give its URL through ``endpoint`` instead.
        public var uploader: Uploader.Configuration
        /// Further targets, each a lane of its own over the same outbox: a record leaves it once every
        /// target has it. The default is none.
        public var otherTargets: [Uploader.Configuration] = []
        /// Every target: ``uploader``, then ``otherTargets``.
        public var targets: [Uploader.Configuration] { [uploader] + otherTargets }
        /// Asked for the endpoint's URL before the first upload, when set (an endpoint started beside
        /// the tracker); it replaces ``uploader``'s URL. The default is none.
        public var endpoint: (@Sendable () async throws -> String)?
        /// On a stop (SIGTERM), how long the outbox may take to upload before the rest is left for
        /// the next run, in seconds. The default is 10. At the end of a replay everything is sent.
        public var shutdownTimeout: Double = 10
        /// How long a decided record may wait in memory before it is committed to the outbox, in
        /// seconds. The default is 0: each fix's records are committed (one transaction) before any
        /// of its events is delivered, so a location that was printed or handed to the sink survives
        /// a kill -9. Above 0, an opt-in for flash-wear-sensitive devices: records are delivered at
        /// once and committed in groups (one SQLite commit for up to ``commitMaxRecords``), each
        /// within this long, the waiting ones at once at the input's end and on a stop; a kill -9
        /// or a crash loses the records of the last `commitWithin` seconds, delivered but not
        /// committed.
        public var commitWithin: Double = 0
        /// Records committed together at most (see ``commitWithin``). The default is 100.
        public var commitMaxRecords = 100

        public init(outboxPath: String, uploader: Uploader.Configuration) {
            self.outboxPath = outboxPath
            self.uploader = uploader
        }
    }
}
