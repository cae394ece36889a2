import ArgumentParser
import Formats
import Lifecycle
import Logging
import TrackServer
import Upload

#if canImport(Glibc)
import Glibc
#endif

extension Uploader.Format: ExpressibleByArgument {}

/// The upload options of `replay` and `track`.
struct UploadOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Upload every location and region transition to this endpoint (http(s)://...), or 'embedded' for a "
            + "test endpoint started in-process on a free loopback port.", valueName: "url|embedded"))
    var upload: String?

    @Option(help: ArgumentHelp("json (our batch), osmand (Traccar) or owntracks. The default is json.",
                               valueName: "format"))
    var format: Uploader.Format = .json

    @Option(help: ArgumentHelp("This device's id. The default is the one the outbox was created with "
                               + "(keeptrack- and 8 hex digits).", valueName: "id"))
    var deviceID: String?

    @Option(help: ArgumentHelp("Sent as Authorization: Bearer TOKEN.", valueName: "token"))
    var token: String?

    @Option(help: ArgumentHelp("Trust the CA certificates in this PEM file (a self-signed endpoint).", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("header"), help: ArgumentHelp("An extra request header, 'Name: value' (repeatable).",
                                                            valueName: "header"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("Records per request with --format json. The default is 500.", valueName: "n"))
    var batchSize = 500

    @Option(help: ArgumentHelp("Seconds a batch that is not full waits for more (fewer, larger requests cost less "
                               + "CPU and radio). The default is 30.", valueName: "seconds"))
    var batchWait = 30.0

    @Option(help: ArgumentHelp("Longest wait between retries. The default is 300.", valueName: "seconds"))
    var maxBackoff = 300.0

    @Option(help: ArgumentHelp("Most records the outbox keeps (the oldest go first, counted). The default is 1000000.",
                               valueName: "n"))
    var outboxMaxRecords = 1_000_000

    @Option(help: ArgumentHelp("Oldest record the outbox keeps, in days. The default is 30.", valueName: "days"))
    var outboxMaxAge = 30.0

    @Option(help: ArgumentHelp("On SIGTERM or SIGINT, keep uploading this long before exiting (what is left stays "
                               + "in the outbox). The default is 10.", valueName: "seconds"))
    var shutdownTimeout = 10.0

    var enabled: Bool { upload != nil }

    func validate() throws {
        if let upload, upload != "embedded", !(upload.hasPrefix("http://") || upload.hasPrefix("https://")) {
            throw ValidationError("--upload takes an http:// or https:// URL, or 'embedded', got '\(upload)'.")
        }
        for h in headers where !h.contains(":") {
            throw ValidationError("--header takes 'Name: value', got '\(h)'.")
        }
        if batchSize < 1 { throw ValidationError("--batch-size must be 1 or more.") }
        if outboxMaxRecords < 1 || !(outboxMaxAge > 0) {
            throw ValidationError("--outbox-max-records and --outbox-max-age must be positive.")
        }
        if !(batchWait >= 0) || !(maxBackoff > 0) { throw ValidationError("--batch-wait and --max-backoff take seconds.") }
        if upload == nil && (deviceID != nil || token != nil || caFile != nil || !headers.isEmpty) {
            throw ValidationError("--device-id, --token, --ca-file and --header go with --upload URL.")
        }
        if let deviceID, let problem = TrailRecord.identifierProblem(deviceID) {
            throw ValidationError("--device-id \(problem).")
        }
    }
}

/// The upload side of a running pipeline: outbox, uploader and (with `embedded`) the endpoint.
final class UploadRuntime: Sendable {
    let outbox: Outbox
    let uploader: Uploader
    let server: TrackServer?
    let serverTask: Task<Void, any Error>?
    let url: String
    let dataDirectory: String

    static func start(_ options: UploadOptions, dataDirectory: String, application: Application?) async throws
        -> UploadRuntime
    {
        mkdirs(dataDirectory)
        var outboxConfiguration = Outbox.Configuration()
        outboxConfiguration.device = options.deviceID
        outboxConfiguration.maxCount = options.outboxMaxRecords
        outboxConfiguration.maxAge = options.outboxMaxAge * 86_400
        let outbox: Outbox
        do {
            outbox = try Outbox(path: dataDirectory + "/outbox.sqlite", configuration: outboxConfiguration)
        } catch {
            throw ValidationError("\(error)")
        }
        var server: TrackServer?
        var serverTask: Task<Void, any Error>?
        var url = options.upload!
        var token = options.token
        if url == "embedded" {
            var c = TrackServer.Configuration(database: dataDirectory + "/endpoint.sqlite")
            let secret = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 16) }.joined()
            c.token = secret
            token = secret
            var logger = Logger(label: "keeptrack.serve")
            logger.logLevel = .warning
            let s = try TrackServer(configuration: c, logger: logger)
            let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
            // Detached: the endpoint must outlive the tracker's graceful shutdown (task-local in
            // ServiceLifecycle) long enough to take the last uploads; finish() stops it.
            serverTask = Task.detached { try await s.run { port in continuation.yield(port) } }
            var it = ready.makeAsyncIterator()
            guard let port = await it.next() else { throw ValidationError("the embedded endpoint did not start") }
            server = s
            let path = switch options.format {
            case .json: "/v1/locations"
            case .osmand: "/"
            case .owntracks: "/owntracks"
            }
            url = "http://127.0.0.1:\(port)\(path)"
        }
        var c = Uploader.Configuration(url: url)
        c.format = options.format
        c.token = token
        c.caFile = options.caFile
        c.headers = options.headers.map { h in
            let i = h.firstIndex(of: ":")!
            return (String(h[..<i]).trimmingCharacters(in: [" "]), String(h[h.index(after: i)...]).trimmingCharacters(in: [" "]))
        }
        c.maxBatchCount = options.batchSize
        c.maxWait = options.batchWait
        c.maxBackoff = options.maxBackoff
        let uploader: Uploader
        do {
            uploader = try Uploader(outbox: outbox, configuration: c, application: application)
        } catch {
            throw ValidationError("\(error)")
        }
        return UploadRuntime(outbox: outbox, uploader: uploader, server: server, serverTask: serverTask, url: url,
                             dataDirectory: dataDirectory)
    }

    init(outbox: Outbox, uploader: Uploader, server: TrackServer?, serverTask: Task<Void, any Error>?, url: String,
         dataDirectory: String) {
        self.outbox = outbox
        self.uploader = uploader
        self.server = server
        self.serverTask = serverTask
        self.url = url
        self.dataDirectory = dataDirectory
    }

    /// Appends and wakes the uploader; returns what the caps evicted.
    func append(_ records: [TrailRecord]) throws -> Outbox.Eviction {
        let (_, evicted) = try outbox.append(records)
        uploader.notify()
        return evicted
    }

    /// Uploads what is left (for at most `within` seconds, if given), stops the endpoint, and says
    /// where the trail is (standard error).
    func finish(quiet: Bool, within: Double? = nil) async throws {
        if let within {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.uploader.run(drain: true) }
                group.addTask { try? await Task.sleep(for: .seconds(within)) }
                await group.next()
                group.cancelAll()
            }
        } else {
            await uploader.run(drain: true)
        }
        let stats = uploader.stats
        let pending = (try? outbox.stats())?.pending ?? -1
        if !quiet {
            var line = "upload: \(grouped(stats.uploaded)) records acknowledged by \(Uploader.hostOf(url)) in "
                + "\(grouped(stats.requests)) requests, \(grouped(stats.retries)) retries"
            if stats.deadLettered > 0 { line += ", \(grouped(stats.deadLettered)) rejected (dead letters)" }
            line += "; \(grouped(pending)) left in the outbox"
            if pending > 0 {
                line += " (\(stats.lastError ?? "not sent")); they go with the next run"
            }
            printError(line)
        }
        if let server {
            let device = outbox.device
            let records = try server.store.trail(device: device)
            let points = records.filter { $0.kind == .location }.count
            let dir = dataDirectory + "/trails"
            mkdirs(dir)
            let path = dir + "/\(device).geojson"
            try writeFile(path, TrailExport.geoJSON(device: device, records: records))
            if !quiet {
                printError("embedded endpoint: \(grouped(points)) points and \(grouped(records.count - points)) region "
                    + "events stored for device \(device) in \(server.store.path)")
                printError("the trail: \(path)  (see it served: keeptrack serve --db \(server.store.path), then "
                    + "GET /v1/devices/\(device)/trail?format=geojson)")
            }
            await server.shutdown()
            _ = try? await serverTask?.value
        }
        await uploader.shutdown()
    }
}

/// Creates a directory and its parents (0700: a trail is personal data).
func mkdirs(_ path: String) {
    var current = ""
    for part in path.split(separator: "/", omittingEmptySubsequences: false) {
        current += (current.isEmpty && part.isEmpty) ? "/" : (current.hasSuffix("/") || current.isEmpty ? "" : "/") + part
        if !current.isEmpty && current != "/" { mkdir(current, 0o700) }
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename (never half a file).
func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    let temporary = path + ".tmp"
    let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw ReadError(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, $0.count - done) }
        if n < 0 {
            if errno == EINTR { continue }
            close(fd)
            throw ReadError(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        done += n
    }
    close(fd)
    guard rename(temporary, path) == 0 else {
        throw ReadError(description: "cannot write \(path): \(String(cString: strerror(errno)))")
    }
}
