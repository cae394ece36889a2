// A program that embeds a tracker: replays an NMEA log through the location service, prints what
// it delivers, and uploads the trail. Usage: embed-tracker LOG URL TOKEN OUTBOX.sqlite
import GPSInput
import Logging
import ServiceLifecycle
import Tracking
import Upload

let arguments = CommandLine.arguments
let source = NMEALogSource(options: .init(path: arguments[1]))   // or GPSDSource, SerialSource
var configuration = Tracker.Configuration()
configuration.standardUpdates?.distanceFilter = 10            // a location every 10 m moved
configuration.launchAtFirstFix = true                         // the log's own clock: starts
configuration.deadlineTimer = false                           // with its first fix
var uploader = Uploader.Configuration(url: arguments[2])      // our JSON batch, POST /v1/locations
uploader.token = arguments[3]
configuration.upload = .init(outboxPath: arguments[4], uploader: uploader)

let tracker = try Tracker(source: source, configuration: configuration, sink: ClosureSink { event in
    if case .location(.location(let l)) = event { print("location", l.timestamp, l.horizontalAccuracy) }
}, clock: source.logClock)
// The uploader and the tracker in one group: SIGTERM stops the input, then uploads what is left.
let group = ServiceGroup(configuration: .init(services: tracker.services, gracefulShutdownSignals: [.sigterm],
                                              logger: Logger(label: "embed-tracker")))
try await group.run()
print("uploaded", tracker.uploadService?.stats?.uploaded ?? 0, "records")
