import AsyncHTTPClient
import Formats
import FoundationEssentials
import Geo
import Lifecycle
import Logging
import Metrics
import MQTT
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Sends the outbox to an HTTP endpoint or an MQTT broker: in batches, in order, inside background
/// tasks, with retries, backoff and idempotent ids, so nothing is lost and nothing is stored twice.
///
/// The transport is the URL's: `http(s)://` posts requests in the configured format;
/// `mqtt(s)://` publishes each record as OwnTracks JSON at QoS 1, several in flight, and a record
/// leaves the outbox only when its PUBACK arrived (``MQTTPublisher``). Everything else below is
/// the same for both.
///
/// The loop, in ``run(drain:)``, performs what ``RetryPolicy`` decides:
/// - waits while the app is suspended (or not allowed a background task): nothing is sent;
/// - takes the next batch (region transitions first, then locations in order) once it is full
///   (``Configuration/maxBatchCount``: the commit that fills it wakes the wait) or its oldest
///   record waited ``Configuration/maxWait``;
/// - sends it inside a background task named `upload`; when the budget expires mid-request the
///   expiration handler cancels the request and the batch stays in the outbox;
/// - on success removes the batch; on 408, 429, 5xx, a network error, a timeout or an answer that
///   is not an acknowledgement, waits (exponential backoff from ``Configuration/initialBackoff``
///   to ``Configuration/maxBackoff`` with full jitter, or the server's `Retry-After`) and tries
///   again; 401, 403 and 404 are settings problems, and so is any other 4xx that every record of
///   the batch gets alike (a Traccar that doesn't know the device answers each position 400): the
///   records stay, a drain stops at once and a run retries at the longest backoff, with the reason
///   saying what to fix; 413 halves the batch; any other 4xx is a permanent rejection of some
///   records: the batch is bisected down to them, and they go to the dead-letter table with the
///   server's reason.
public final class Uploader: Sendable {
    public enum GzipMode: String, Sendable {
        /// Compress once the endpoint says it accepts gzip (`Accept-Encoding` in a response).
        case auto
        case always
        case never
    }

    public struct Configuration: Sendable {
        /// The endpoint: `http(s)://host[:port]/path`, or a broker:
        /// `mqtt(s)://[user[:password]@]host[:port][/topic]` (the topic defaults to
        /// `owntracks/USER/DEVICE`, USER being the URL's user or ``formatSettings``' user).
        public var url: String
        /// The wire format (``UploadFormats/all``). The default is our JSON batch.
        public var format: any UploadFormat = JSONBatchFormat()
        /// Sent as `Authorization: Bearer TOKEN`. The default is none.
        public var token: String?
        /// Extra request headers; one named like a header the format sets replaces it.
        public var headers: [(String, String)] = []
        /// A PEM file of CA certificates to trust instead of the system's. The default is none.
        public var caFile: String?
        /// Records per batch. The default is 500.
        public var maxBatchCount = 500
        /// Bytes per batch body (before compression). The default is 1 MiB.
        public var maxBatchBytes = 1 << 20
        /// How long a batch that is not full waits for more. The default is 5 s.
        public var maxWait: Double = 5
        /// The first retry's wait. The default is 1 s.
        public var initialBackoff: Double = 1
        /// The longest wait between retries. The default is 300 s.
        public var maxBackoff: Double = 300
        /// Per request (over MQTT: per batch, for its PUBACKs). The default is 30 s.
        public var timeout: Double = 30
        /// Over MQTT: publishes sent before their PUBACK arrives. The default is 100.
        public var maxInflight = 100
        /// The default is `auto`.
        public var gzip: GzipMode = .auto
        /// What the format may need besides the records (OwnTracks' user).
        public var formatSettings = UploadFormatSettings()
        /// When draining, give up after this many failed attempts in a row (the records stay in
        /// the outbox for the next run). The default is 5.
        public var drainAttempts = 5
        /// The target's name when the outbox feeds several (``Outbox/useTargets(_:)``): its
        /// acknowledgements and dead letters are filed under it. The default is none (the only
        /// target: what it acknowledges leaves the outbox).
        public var target: String?
        /// Whether the counters carry a `target` label (``target``). The default is false.
        public var labelMetrics = false
        /// The device id this target files records under, instead of the outbox's. The default is
        /// the outbox's.
        public var deviceID: String?

        public init(url: String) { self.url = url }

        /// `"Name: value"` as a header (name and value trimmed), or nil without a colon.
        public static func header(parsing text: String) -> (String, String)? {
            guard let i = text.firstIndex(of: ":") else { return nil }
            func trimmed(_ s: Substring) -> String {
                String(s.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
            }
            return (trimmed(text[..<i]), trimmed(text[text.index(after: i)...]))
        }

        /// Whether the file at `path` holds at least one PEM certificate, as ``caFile`` must for an
        /// HTTPS upload (checked again when the uploader starts).
        public static func holdsPEMCertificates(_ path: String) -> Bool {
            (try? NIOSSLCertificate.fromPEMFile(path)).map { !$0.isEmpty } == true
        }
    }

    /// What the uploader did, for status, metrics and tests.
    public struct Stats: Hashable, Sendable {
        /// Records the endpoint acknowledged.
        public var uploaded = 0
        /// Requests that succeeded.
        public var requests = 0
        /// Attempts that failed (a batch's requests as one), whether tried again or the last of
        /// the run (given up, wrong settings).
        public var retries = 0
        /// Records moved to the dead-letter table.
        public var deadLettered = 0
        /// Records with no form in the format (OwnTracks dwells), dropped from the outbox.
        public var skipped = 0
        /// Requests cancelled because the background time ran out.
        public var expired = 0
        /// When the last request succeeded (seconds since 1970, on the uploader's clock).
        public var lastSuccess: Double?
        /// The last failure, a sentence without coordinates.
        public var lastError: String?
        /// The settings the last failure says to check (a settings problem, not the records), for
        /// the caller to name as its options; empty once an upload succeeds.
        public var settingsToCheck: [UploadError.Setting] = []
        /// How long the last retry waited, in seconds (the backoff, or the server's Retry-After).
        public var lastRetryWait: Double?

        public init() {}
    }

    public let outbox: Outbox
    public let configuration: Configuration
    let application: Application?
    let logger: Logger
    let transport: Transport
    let signal = Signal()
    let state = Mutex(Stats())
    /// When the last failure's backoff (or the server's Retry-After) ends, until a request succeeds:
    /// a run that starts before then (the drain after a live run, cancelled in its wait) waits for
    /// it rather than asking again at once.
    let notBefore = Mutex<EpochInstant?>(nil)
    let gzipAccepted = Atomic<Bool>(false)
    /// Where requests go and their HTTP Basic credentials: the URL's user and password, taken out of
    /// it once (as a browser and curl send them; not part of the address AsyncHTTPClient requests).
    let requestURL: String
    let basicAuthorization: String?
    /// Batching waits, backoffs and the times of successes.
    let clock: any EpochClock
    /// The backoff's jitter.
    let random: any RandomNumberGenerator & Sendable
    let metrics: UploadMetrics
    /// The device id requests carry: the target's own, or the outbox's.
    var device: String { configuration.deviceID ?? outbox.device }

    /// - Parameters:
    ///   - application: the lifecycle the uploads run in (background tasks, suspension); `nil`
    ///     uploads whenever there is something to send.
    ///   - clock: what batches fill and retries back off on, and the time of a success. The default
    ///     is the wall clock.
    ///   - random: the source of the backoff's jitter (a seeded one makes retries repeatable).
    /// - Throws: ``UploadError`` when the URL or the CA file cannot be used.
    public init(
        outbox: Outbox, configuration: Configuration, application: Application? = nil,
        logger: Logger = Logger(label: "keeptrack.upload"),
        clock: any EpochClock = WallClock(),
        random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) throws(UploadError) {
        self.outbox = outbox
        self.configuration = configuration
        self.application = application
        self.logger = logger
        self.clock = clock
        self.random = random
        basicAuthorization = Configuration.basicAuthorization(configuration.url)
        requestURL =
            basicAuthorization == nil ? configuration.url : Configuration.withoutCredentials(configuration.url)
        metrics = UploadMetrics(target: configuration.labelMetrics ? configuration.target : nil)
        if MQTTEndpoint.isMQTT(configuration.url) {
            transport = .mqtt(
                try MQTTPublisher(configuration: configuration, device: configuration.deviceID ?? outbox.device))
        } else {
            transport = .http(try Self.httpClient(configuration))
        }
        gzipAccepted.store(configuration.gzip == .always, ordering: .relaxed)
        application?.observe { [signal] event in
            if case .transition = event { signal.fire() }
        }
    }

    /// How batches travel.
    enum Transport: Sendable {
        case http(HTTPClient)
        case mqtt(MQTTPublisher)
    }

    static func httpClient(_ configuration: Configuration) throws(UploadError) -> HTTPClient {
        if configuration.format is HomeAssistantFormat {
            throw UploadError(
                .configuration, "Home Assistant's discovery goes over MQTT: the URL must start with mqtt:// or mqtts://"
            )
        }
        guard configuration.url.hasPrefix("http://") || configuration.url.hasPrefix("https://") else {
            throw UploadError(
                .configuration,
                "the upload URL must start with http://, https://, mqtt:// or mqtts://, "
                    + "got '\(configuration.url)'")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = configuration.caFile {
            guard Configuration.holdsPEMCertificates(caFile) else {
                throw UploadError(.configuration, "the CA file \(caFile): no PEM certificate could be read")
            }
            tls.trustRoots = .file(caFile)
        }
        var http = HTTPClient.Configuration(
            tlsConfiguration: tls,
            timeout: .init(
                connect: .seconds(min(5, Int64(configuration.timeout))),
                read: .seconds(Int64(configuration.timeout))))
        http.connectionPool = .init(idleTimeout: .seconds(30))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
    }

    deinit {
        if case .http(let client) = transport { try? client.syncShutdown() }
    }

    public var stats: Stats { state.withLock { $0 } }

    /// New records are in the outbox (or something else changed): look again now.
    public func notify() { signal.fire() }

    /// Uploads until cancelled, or with `drain` until the outbox is empty (records appended while
    /// it runs included) or ``Configuration/drainAttempts`` attempts in a row failed. While the
    /// app is suspended nothing is sent: a drain then returns at once, leaving the records.
    public func run(drain: Bool = false) async {
        var policy = RetryPolicy(configuration: configuration, drain: drain, random: random)
        var action = policy.start()
        var batch: [TrailRecord] = []
        var reason = ""
        // The outbox's appends before the last read: a filling batch counts the records it lacks from it.
        var mark = 0
        if let wait = notBefore.withLock({ $0 }), wait > clock.now, !Task.isCancelled {
            try? await clock.sleep(until: wait, tolerance: nil)
        }
        while true {
            switch action {
            case .read(let limit):
                if Task.isCancelled {
                    action = policy.shutdown()
                    continue
                }
                if let app = application, !app.state.isRunning {
                    action = policy.suspended()
                    if case .stop = action, ((try? pending()) ?? 0) > 0 {
                        record(error: "the app is \(app.state.rawValue): nothing is sent until it runs again")
                    }
                    continue
                }
                mark = outbox.appendMark
                do {
                    batch = try outbox.nextBatch(
                        maxCount: limit,
                        transitionsFirst: configuration.format.transitionsFirst,
                        target: configuration.target)
                } catch {
                    record(error: "\(error)")
                    action = policy.readFailed(now: clock.now)
                    continue
                }
                // The oldest record's age matters only to a batch that is not full.
                let oldest = batch.isEmpty || batch.count >= limit ? nil : try? oldestAppended()
                action = policy.batchRead(
                    count: batch.count,
                    oldestAppended: oldest.map(EpochInstant.init(secondsSince1970:)),
                    now: clock.now)
            case .send(let more):
                // Stopped (a graceful shutdown's first phase, or its time up): no new request.
                if Task.isCancelled {
                    action = policy.shutdown()
                    continue
                }
                switch await sendInBackgroundTask(batch, more: more, cancellable: drain) {
                case .done:
                    notBefore.withLock { $0 = nil }
                    action = policy.acknowledged()
                case .settings(let why, let check):
                    reason = why
                    state.withLock { $0.settingsToCheck = check }
                    action = policy.settingsProblem(now: clock.now)
                case .notAllowed: action = policy.notAllowed()
                case .retry(let after, let why):
                    // A request this run's own stop cancelled says nothing of the endpoint.
                    if !(Task.isCancelled && why == Self.cancelledReason) { reason = why }
                    action = policy.failed(retryAfter: after, now: clock.now)
                case .progressed(let after, let why):
                    if !(Task.isCancelled && why == Self.cancelledReason) { reason = why }
                    action = policy.failed(retryAfter: after, now: clock.now, progressed: true)
                case .tooLarge: action = policy.tooLarge()
                }
            case .recovered(let failed):
                logger.info(
                    "upload recovered", metadata: ["failed-attempts": "\(failed)", "records": "\(batch.count)"])
                action = .read(limit: policy.batchLimit)
            case .waitForWake(let deadline):
                await signal.wait(until: deadline, on: clock)
                action = policy.woke()
            case .fill(let deadline, let records):
                await outbox.waitForAppends(records, after: mark, until: deadline, on: clock)
                action = policy.woke()
            case .backOff(let deadline, let wait, let cause):
                if Task.isCancelled {
                    // Stopped after a failure: its reason is what the summary says, not "not sent".
                    if !reason.isEmpty { record(error: reason) }
                    action = policy.shutdown()
                    continue
                }
                state.withLock {
                    $0.retries += 1
                    $0.lastRetryWait = wait
                }
                notBefore.withLock { $0 = deadline }
                metrics.requestsFailed.increment()
                switch cause {
                case .transient: record(error: "\(reason); retrying in \(Int(wait.rounded())) s")
                case .settings: record(error: "\(reason); trying again in \(Int(wait.rounded())) s")
                }
                try? await clock.sleep(until: deadline, tolerance: nil)
                action = policy.woke()
            case .stop(let stop):
                switch stop {
                case .drained, .suspended, .shutdown: break
                case .settings:
                    state.withLock { $0.retries += 1 }
                    metrics.requestsFailed.increment()
                    record(error: reason)
                case .gaveUp(let attempts):
                    record(error: "\(reason); giving up for now after \(attempts) attempts")
                    state.withLock { $0.retries += 1 }
                }
                return
            }
        }
    }

    /// Records this target lacks in the outbox.
    public func pending() throws(UploadError) -> Int {
        guard let target = configuration.target, outbox.runTargets.count > 1 else { return try outbox.stats().pending }
        if let status = try outbox.targetStatuses().first(where: { $0.target.name == target }) { return status.pending }
        return try outbox.stats().pending
    }

    /// When the oldest record this target lacks was appended.
    func oldestAppended() throws(UploadError) -> Double? {
        guard let target = configuration.target, outbox.runTargets.count > 1 else {
            return try outbox.stats().oldestAppended
        }
        return try outbox.oldestAppended(for: target)
    }

    func record(error: String) {
        let changed = state.withLock { stats in
            defer { stats.lastError = error }
            return stats.lastError != error
        }
        if changed, let target = configuration.target { outbox.noteTarget(target, success: nil, error: error) }
        logger.warning("upload failed", metadata: ["reason": "\(error)"])
    }

    enum Attempt {
        case done
        case notAllowed
        case retry(after: Double?, reason: String)
        /// As ``retry(after:reason:)``, after some of the batch's requests were acknowledged: a
        /// failure, not one in a row.
        case progressed(after: Double?, reason: String)
        /// Not the records but the settings (URL, credentials, device): nothing is dead-lettered;
        /// a drain stops at once, a run retries at the longest backoff.
        case settings(reason: String, check: [UploadError.Setting])
        case tooLarge
    }

    /// Sends `batch` inside a background task whose expiration cancels the request.
    ///
    /// With `cancellable`, the caller's cancellation cancels the request in flight (a drain whose
    /// time is up); without, the request ends as it would, and the caller stops after it.
    func sendInBackgroundTask(_ batch: [TrailRecord], more: Bool, cancellable: Bool = false) async -> Attempt {
        let request = Task { await self.send(batch, more: more) }
        var taskID = AppLifecycle.TaskIdentifier.invalid
        if let app = application {
            let box = TaskBox()
            taskID = app.beginBackgroundTask(name: "upload") { [self] in
                request.cancel()
                state.withLock { $0.expired += 1 }
                metrics.expired.increment()
                app.endBackgroundTask(box.id)
            }
            box.id = taskID
            if taskID == .invalid {
                request.cancel()
                _ = await request.value
                return .notAllowed
            }
        }
        let result: Attempt
        if cancellable {
            result = await withTaskCancellationHandler {
                await request.value
            } onCancel: {
                request.cancel()
            }
        } else {
            result = await request.value
        }
        application?.endBackgroundTask(taskID)
        return result
    }

    /// One batch, in the configured format: one request, or one per record (or per position, for
    /// OsmAnd) for formats of one record per request, up to ``UploadFormat/maxInFlight`` at once.
    /// `more` says the batch was full.
    func send(_ batch: [TrailRecord], more: Bool = false) async -> Attempt {
        // A record no server would take (a corrupt fix's speed of 1e300) is not encoded: the
        // encoders would leave the field out or the server refuse it forever, stalling the outbox.
        let t = clock.now.secondsSince1970
        var batch = batch
        if batch.contains(where: { $0.problem(now: t) != nil }) {
            for r in batch {
                if let problem = r.problem(now: t) {
                    guard case .done = dead([r], status: 0, text: "not sent: \(problem)") else {
                        return .retry(after: nil, reason: "cannot set aside an invalid record")
                    }
                }
            }
            batch.removeAll { $0.problem(now: t) != nil }
            if batch.isEmpty { return .done }
        }
        if case .mqtt(let publisher) = transport { return await publish(batch, via: publisher) }
        let format = configuration.format
        guard format.recordsPerRequest != nil else { return await sendBatch(batch) }
        let groups = format.requests(batch, settings: configuration.formatSettings, more: more)
        var outcomes = [Outcome?](repeating: nil, count: groups.count)
        await withTaskGroup(of: (Int, Outcome).self) { tasks in
            var next = 0
            func launch() {
                let i = next
                next += 1
                tasks.addTask { (i, await self.sendRequest(groups[i])) }
            }
            while next < groups.count && next < max(1, format.maxInFlight) { launch() }
            var stop = false
            while let (i, outcome) = await tasks.next() {
                outcomes[i] = outcome
                if case .failed = outcome { stop = true }
                if !stop && next < groups.count && !Task.isCancelled { launch() }
            }
        }
        // Rejections: a setting's problem when every request got the same one, else the records'.
        var rejected: [(records: [TrailRecord], status: Int, text: String)] = []
        var failure: Attempt?
        var acknowledged = 0
        for (group, outcome) in zip(groups, outcomes) {
            switch outcome {
            case .acknowledged?: acknowledged += 1
            case .rejected(let status, let text)?: rejected.append((group, status, text))
            case .failed(let attempt)?: failure = failure ?? attempt
            case nil: break
            }
        }
        if !rejected.isEmpty {
            let same = rejected.allSatisfy { $0.status == rejected[0].status && $0.text == rejected[0].text }
            if same && acknowledged == 0 && (rejected.count >= 2 || failure != nil) {
                return failure
                    ?? settingsProblem(
                        rejected.flatMap(\.records), status: rejected[0].status,
                        text: rejected[0].text)
            }
            for r in rejected {
                guard case .done = dead(r.records, status: r.status, text: r.text) else {
                    return .retry(after: nil, reason: "cannot set aside rejected records")
                }
            }
        }
        if Task.isCancelled && failure == nil && outcomes.contains(where: { $0 == nil }) {
            return .retry(after: nil, reason: "cancelled: the background time ran out")
        }
        if case .retry(let after, let reason)? = failure, acknowledged > 0 {
            return .progressed(after: after, reason: reason)
        }
        return failure ?? .done
    }

    /// What one request came to.
    enum Outcome {
        /// Stored (or skipped: no form in the format), and removed from the outbox.
        case acknowledged
        /// Refused for good (a 4xx about the request): the records stay until the caller decides
        /// whether they or the settings are wrong.
        case rejected(status: Int, text: String)
        /// Not stored; the attempt to return (retry, settings, too large).
        case failed(Attempt)
    }

    /// A batch in one request; a permanent rejection is narrowed down to the records it is about,
    /// unless every record gets it alike: then the settings are wrong, not the records.
    func sendBatch(_ records: [TrailRecord]) async -> Attempt {
        switch await sendRequest(records) {
        case .acknowledged: return .done
        case .failed(let attempt): return attempt
        case .rejected(let status, let text):
            if records.count == 1 { return dead(records, status: status, text: text) }
            switch await narrow(records, status: status, text: text) {
            case .same: return settingsProblem(records, status: status, text: text)
            case .mixed: return .done
            case .abort(let attempt): return attempt
            }
        }
    }

    enum Narrowed {
        /// Every record was rejected with the same status and reason (none dead-lettered yet).
        case same
        /// Some were stored, or the reasons differ: the rejected ones are dead letters now.
        case mixed
        case abort(Attempt)
    }

    /// Bisects `records`, which were rejected together with `status` and `text`.
    func narrow(_ records: [TrailRecord], status: Int, text: String) async -> Narrowed {
        let half = records.count / 2
        var parts: [(records: [TrailRecord], same: Bool, status: Int, text: String)] = []
        for part in [Array(records[..<half]), Array(records[half...])] {
            switch await sendRequest(part) {
            case .acknowledged:
                parts.append((part, false, 0, ""))
            case .failed(let attempt):
                return .abort(attempt)
            case .rejected(let s, let t):
                if part.count == 1 {
                    parts.append((part, true, s, t))
                    continue
                }
                switch await narrow(part, status: s, text: t) {
                case .same: parts.append((part, true, s, t))
                case .mixed: parts.append((part, false, 0, ""))
                case .abort(let attempt): return .abort(attempt)
                }
            }
        }
        if parts.allSatisfy({ $0.same && $0.status == status && $0.text == text }) { return .same }
        for p in parts where p.same {
            guard case .done = dead(p.records, status: p.status, text: p.text) else {
                return .abort(.retry(after: nil, reason: "cannot set aside rejected records"))
            }
        }
        return .mixed
    }

    /// Every record of a batch refused alike: the records stay, the upload stops, and the reason
    /// says what to fix.
    func settingsProblem(_ records: [TrailRecord], status: Int, text: String) -> Attempt {
        let format = configuration.format
        var hint =
            "check the upload URL (\(format.name) goes to \(format.serverPath) on a server that speaks it), "
            + "the format"
        if format is OsmAndFormat {
            hint +=
                " and the device id (Traccar answers 400 to a device it does not know: add one with identifier "
                + "'\(device)' in Traccar first)"
        } else {
            hint += " and the device id"
        }
        return .settings(
            reason: "the endpoint answered \(status) to every one of \(records.count) records alike "
                + "(\(snippet(text))): a settings problem, not the records; \(hint); the records stay in the outbox",
            check: [.url, .format, .deviceID])
    }

    /// One request for `records`.
    func sendRequest(_ records: [TrailRecord]) async -> Outcome {
        let format = configuration.format
        guard var request = format.request(for: records, device: device, settings: configuration.formatSettings)
        else { return outcome(acknowledge(records, skipped: records.count)) }
        if request.body.count > configuration.maxBatchBytes && records.count > 1 { return .failed(.tooLarge) }
        if request.compressible && gzipAccepted.load(ordering: .relaxed) && configuration.gzip != .never {
            request.body = Gzip.compress(request.body)
            request.headers.append(("Content-Encoding", "gzip"))
        }
        switch await post(request) {
        case .failure(let reason):
            return .failed(.retry(after: nil, reason: reason))
        case .untrusted(let reason):
            return .failed(.settings(reason: reason, check: [.caFile, .url]))
        case .answer(let status, let retryAfter, let body):
            if (200..<300).contains(status) {
                if let problem = format.problemWithAcknowledgement(body, of: records.count) {
                    return .failed(
                        .retry(
                            after: nil,
                            reason: "the endpoint answered \(status) with \(problem) "
                                + "(\(snippet(body)))"))
                }
                return outcome(acknowledge(records))
            }
            let text = String(decoding: body, as: UTF8.self)
            switch status {
            case 408, 429, 500...599:
                return .failed(.retry(after: retryAfter, reason: "the endpoint answered \(status) (\(snippet(text)))"))
            case 401, 403:
                // An encrypted payload that does not open on the server is refused as unauthentic too.
                let encrypted = configuration.format is EncryptedOwnTracksFormat
                return .failed(
                    .settings(
                        reason: "the endpoint refuses our credentials (\(status): \(snippet(text))): "
                            + (encrypted ? "check the token and the secret" : "check the token"),
                        check: encrypted ? [.token, .secret] : [.token]))
            case 404:
                return .failed(
                    .settings(
                        reason: "the endpoint has no \(configuration.url) (404: \(snippet(text))): "
                            + "check the upload URL; the records stay in the outbox", check: [.url]))
            case 413:
                return records.count > 1 ? .failed(.tooLarge) : .rejected(status: status, text: text)
            default:
                return .rejected(status: status, text: text)
            }
        }
    }

    func outcome(_ attempt: Attempt) -> Outcome {
        if case .done = attempt { return .acknowledged }
        return .failed(attempt)
    }

    /// Acknowledges records the endpoint stored.
    func acknowledge(_ records: [TrailRecord], skipped: Int = 0, requests: Int = 1) -> Attempt {
        do {
            try outbox.acknowledge(records.map(\.sequence), target: configuration.target)
        } catch {
            return .retry(after: nil, reason: "\(error)")
        }
        let now = clock.now.secondsSince1970
        // The target's row is written after a failure and once a minute, not at every batch.
        let note = state.withLock {
            let note = $0.lastError != nil || !(now - ($0.lastSuccess ?? -.infinity) < 60)
            $0.uploaded += records.count - skipped
            $0.skipped += skipped
            $0.requests += requests
            $0.lastSuccess = now
            $0.lastError = nil
            $0.settingsToCheck = []
            return note
        }
        if note, let target = configuration.target { outbox.noteTarget(target, success: now, error: nil) }
        metrics.uploaded.increment(by: records.count - skipped)
        metrics.requestsOK.increment(by: requests)
        return .done
    }

    func dead(_ records: [TrailRecord], status: Int, text: String) -> Attempt {
        do {
            try outbox.deadLetter(
                records.map(\.sequence), status: status, reason: String(text.prefix(500)),
                target: configuration.target)
        } catch {
            return .retry(after: nil, reason: "\(error)")
        }
        state.withLock { $0.deadLettered += records.count }
        metrics.deadLettered.increment(by: records.count)
        // The server's reason may quote the record: only at debug level (coordinates stay out of logs).
        logger.error(
            "records rejected by the endpoint, kept as dead letters",
            metadata: ["status": "\(status)", "count": "\(records.count)"])
        logger.debug("rejection", metadata: ["reason": "\(snippet(text))"])
        return .done
    }

    /// Why a request was cancelled: the app's background time ran out (its task's expiration), or
    /// a stop whose time was up (then not said: the last answer is).
    static let cancelledReason = "cancelled: the background time ran out"

    enum Response {
        case answer(status: Int, retryAfter: Double?, body: [UInt8])
        /// No answer, for a reason that may pass (a network error, a timeout).
        case failure(String)
        /// No answer: the TLS handshake failed (a certificate not trusted here), a setting to fix.
        case untrusted(String)
    }

    func post(_ r: UploadRequest) async -> Response {
        guard case .http(let client) = transport else { preconditionFailure("an HTTP request over MQTT") }
        var request = HTTPClientRequest(url: requestURL)
        request.method = .POST
        request.headers.add(name: "User-Agent", value: "keeptrack")
        for (name, value) in r.headers { request.headers.add(name: name, value: value) }
        if let basicAuthorization { request.headers.replaceOrAdd(name: "Authorization", value: basicAuthorization) }
        if let token = configuration.token {
            request.headers.replaceOrAdd(name: "Authorization", value: "Bearer \(token)")
        }
        // The user's headers win over the format's (a Recorder takes the first X-Limit-U it sees).
        for (name, value) in configuration.headers { request.headers.replaceOrAdd(name: name, value: value) }
        request.body = .bytes(r.body)
        do {
            let response = try await client.execute(request, timeout: .seconds(Int64(configuration.timeout)))
            let body = try await response.body.collect(upTo: 64 * 1024)
            if configuration.gzip == .auto,
                response.headers["Accept-Encoding"].contains(where: { $0.lowercased().contains("gzip") })
            {
                gzipAccepted.store(true, ordering: .relaxed)
            }
            let retryAfter = response.headers.first(name: "Retry-After").flatMap(Double.init)
            return .answer(status: Int(response.status.code), retryAfter: retryAfter, body: Array(buffer: body))
        } catch is CancellationError {
            return .failure(Self.cancelledReason)
        } catch let error as HTTPClientError where error == .cancelled {
            return .failure(Self.cancelledReason)
        } catch {
            return Self.failure(error, host: Self.hostOf(requestURL), timeout: configuration.timeout)
        }
    }

    /// The host part of a URL, for messages (no credentials, no path, no query: no personal data).
    public static func hostOf(_ url: String) -> String {
        let parts = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count > 2 else { return url }
        return String(parts[2].split(separator: "@").last ?? "")
    }

    func snippet(_ text: String) -> String {
        let t = String(text.prefix(200).map { $0 == "\n" || $0 == "\r" ? " " : $0 })
        return t.isEmpty ? "no body" : t
    }

    func snippet(_ body: [UInt8]) -> String { snippet(String(decoding: body.prefix(400), as: UTF8.self)) }

    /// Stops the HTTP client, or closes the broker connection.
    public func shutdown() async {
        switch transport {
        case .http(let client): try? await client.shutdown()
        case .mqtt(let publisher): await publisher.close()
        }
    }
}

/// A task id the expiration handler reads after `begin` returned it.
final class TaskBox: Sendable {
    private let storage = Mutex(AppLifecycle.TaskIdentifier.invalid)
    var id: AppLifecycle.TaskIdentifier {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

/// The uploader's counters (swift-metrics: the executable picks the backend).
struct UploadMetrics: Sendable {
    let uploaded: Counter
    let deadLettered: Counter
    let requestsOK: Counter
    let requestsFailed: Counter
    let expired: Counter

    /// - Parameter target: the `target` label of each counter, when the outbox feeds several.
    init(target: String? = nil) {
        let label: [(String, String)] = target.map { [("target", $0)] } ?? []
        uploaded = Counter(label: "keeptrack_upload_records_total", dimensions: [("result", "ok")] + label)
        deadLettered = Counter(label: "keeptrack_upload_records_total", dimensions: [("result", "dead_letter")] + label)
        requestsOK = Counter(label: "keeptrack_upload_requests_total", dimensions: [("result", "ok")] + label)
        requestsFailed = Counter(label: "keeptrack_upload_requests_total", dimensions: [("result", "retried")] + label)
        expired = Counter(label: "keeptrack_upload_expired_total", dimensions: label)
    }
}

extension Uploader {
    /// A target's stable name from its URL: `host[:port]/path` for HTTP(S) (no scheme, credentials
    /// or query), `mqtt://host[:port]/topic` for a broker, `embedded` as it is.
    public static func targetName(_ url: String) -> String {
        let r = redacted(url)
        if r.hasPrefix("https://") { return String(r.dropFirst(8)) }
        if r.hasPrefix("http://") { return String(r.dropFirst(7)) }
        return r
    }

    /// The URL without credentials, query or fragment (no token, no password in status or names).
    public static func redacted(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        var rest = url[scheme.upperBound...]
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[..<slash].lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        return String(url[..<scheme.upperBound]) + rest
    }
}

extension Uploader.Configuration {
    /// What is wrong with an http(s):// upload URL, or `nil`: it needs a host, and a port from 1 to
    /// 65535 when it names one (a port past that would stop the run at its first request).
    public static func problem(httpURL url: String) -> String? {
        guard let c = URLComponents(string: url) else { return "not a URL" }
        guard let host = c.host, !host.isEmpty else { return "the URL names no host" }
        if let port = c.port, !(1...65_535).contains(port) { return "port \(port) is not 1 to 65535" }
        return nil
    }

    /// `Basic base64(user:password)` for a URL with a user in it (`https://anna:secret@host/pub`),
    /// or `nil`.
    public static func basicAuthorization(_ url: String) -> String? {
        guard let c = URLComponents(string: url), let user = c.user, !user.isEmpty else { return nil }
        let pair = user + ":" + (c.password ?? "")
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }

    /// The URL without its user and password (to say it).
    static func withoutCredentials(_ url: String) -> String {
        guard var c = URLComponents(string: url) else { return url }
        (c.user, c.password) = (nil, nil)
        return c.string ?? url
    }
}
