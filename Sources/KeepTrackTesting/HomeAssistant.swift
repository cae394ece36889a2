import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A real Home Assistant (`homeassistant==2024.3.3` from PyPI, in the virtual environment
/// `tools/setup` makes under `.build/homeassistant-venv`) on a free loopback port, with a throwaway
/// configuration directory: started, waited for (its API polled, off the cooperative pool),
/// onboarded through its API (a user, an auth code, a token: the `users` step only; the next steps set
/// up integrations that reach the network), with its MQTT integration on a private mosquitto
/// (``Broker``) and, on demand, its OwnTracks integration, both through config flows; stopped by its pid.
///
/// ``shared()`` is the one instance of a test process (about 10 to 20 s to start here): suites give
/// each test its own device ids, and run `.serialized` when a test restarts the broker. A watchdog
/// (a shell in its own session) stops Home Assistant and the broker and removes the directory once
/// the test process is gone, however it ended.
///
/// Read what it recorded with ``state(_:)``, ``states()`` and ``history(_:since:)`` (the recorder's
/// `/api/history/period`), and wait for a condition with ``eventually(_:within:every:_:)``.
public final class HomeAssistant: @unchecked Sendable {
    /// The release the tests run: the newest that runs on Debian 12's Python 3.11.
    public static let version = "2024.3.3"

    /// The virtual environment `tools/setup` makes (`KEEPTRACK_HOMEASSISTANT_VENV` names another).
    public static var environment: String {
        ProcessInfo.processInfo.environment["KEEPTRACK_HOMEASSISTANT_VENV"]
            ?? packageRoot.appendingPathComponent(".build/homeassistant-venv").path
    }

    /// Home Assistant's environment is not there: why, in a sentence (tests skip with it).
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    /// The `hass` executable of a complete environment.
    /// - Throws: ``Unavailable`` saying why there is none: `tools/setup` was not run, or could not
    ///   install Home Assistant (its reason, from `.build/homeassistant-venv.unavailable`).
    public static func executable() throws -> String {
        let venv = environment
        let hass = venv + "/bin/hass"
        let ready = venv + "/keeptrack-ready"
        if access(hass, X_OK) == 0, FileManager.default.fileExists(atPath: ready) { return hass }
        let why =
            (try? String(contentsOfFile: venv + ".unavailable", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        throw Unavailable(
            description: "no Home Assistant \(version) environment at \(venv): "
                + (why.map { "tools/setup could not create it: \($0)" }
                    ?? "run tools/setup, which installs homeassistant==\(version) from PyPI into it"))
    }

    /// A zone of Home Assistant's (`zone.NAME`, a device tracker inside it takes its name as its state).
    public struct Zone: Sendable, Hashable {
        public var name: String
        public var latitude: Double
        public var longitude: Double
        /// Metres.
        public var radius: Double
        public init(name: String, latitude: Double, longitude: Double, radius: Double) {
            (self.name, self.latitude, self.longitude, self.radius) = (name, latitude, longitude, radius)
        }
    }

    /// An entity's state as the API gives it.
    public struct State: Sendable, Equatable {
        public var entityID: String
        public var state: String
        public var attributes: [String: Value]
        /// When it was written (ISO 8601, as Home Assistant says it).
        public var lastUpdated: String

        public func number(_ key: String) -> Double? { attributes[key]?.number }
        public func string(_ key: String) -> String? { attributes[key]?.string }
    }

    /// A JSON value of an attribute.
    public enum Value: Sendable, Equatable {
        case number(Double)
        case string(String)
        case bool(Bool)
        case null
        /// An array or an object, as JSON text.
        case other(String)

        public var number: Double? { if case .number(let d) = self { d } else { nil } }
        public var string: String? { if case .string(let s) = self { s } else { nil } }

        init(_ any: Any) {
            switch any {
            // JSONSerialization's booleans are NSNumbers of type char.
            case let n as NSNumber where String(cString: n.objCType) == "c": self = .bool(n.boolValue)
            case let n as NSNumber: self = .number(n.doubleValue)
            case let s as String: self = .string(s)
            case is NSNull: self = .null
            default:
                let data = (try? JSONSerialization.data(withJSONObject: any, options: [.fragmentsAllowed])) ?? Data()
                self = .other(String(decoding: data, as: UTF8.self))
            }
        }
    }

    /// What went wrong talking to Home Assistant: the request and its answer.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The HTTP port, on 127.0.0.1.
    public let port: Int
    /// The configuration directory (`configuration.yaml`, `home-assistant.log`, the recorder's database).
    public let directory: String
    /// The broker its MQTT integration uses.
    public let broker: Broker
    /// Seconds from the launch until the API answered, and until it was onboarded with MQTT set up.
    public private(set) var startup: (api: Double, ready: Double) = (0, 0)
    private let process = Process()
    private let lock = NSLock()
    /// Held while the OwnTracks integration is set up (not `lock`: a request takes that for its token).
    private let ownTracksLock = NSLock()
    private var token = ""
    private var refreshToken = ""
    private var tokenIssued = ContinuousClock.now
    private var zones: [Zone]
    private var ownTracksEntry: (webhookPath: String, secret: String)?

    nonisolated(unsafe) private static var sharedInstance: Result<HomeAssistant, any Error>?
    private static let sharedLock = NSLock()

    /// The test process's Home Assistant, started on first use on a thread of its own; every later
    /// call gets the same one (or the same error).
    /// - Throws: ``Unavailable`` when there is no environment; a failure to start otherwise.
    public static func shared() async throws -> HomeAssistant {
        try await offThePool {
            try sharedLock.withLock {
                if let shared = sharedInstance { return try shared.get() }
                let result = Result { try HomeAssistant() }
                sharedInstance = result
                // Stopped when the test process exits (the watchdog covers a crash or a kill).
                if case .success = result { atexit { try? HomeAssistant.sharedInstance?.get().stop() } }
                return try result.get()
            }
        }
    }

    /// Starts Home Assistant with `zones` and its home at `home` (far from any fixture: nothing is
    /// `home` unless a test puts it there), its own broker, onboards it and sets up MQTT. Blocks for
    /// the whole start (10 to 20 s): call it off the cooperative pool (``shared()`` does).
    /// - Throws: ``Unavailable``, ``MissingTool`` (no mosquitto), ``TimedOut`` or ``Failure``.
    public init(zones: [Zone] = [], home: (latitude: Double, longitude: Double) = (0, 0)) throws {
        let hass = try Self.executable()
        let launched = ContinuousClock.now
        broker = try Broker()
        let directory = try TemporaryDirectory("keeptrack-homeassistant", removedAtExit: false).path
        self.directory = directory
        self.zones = zones
        let process = self.process
        do {
            port = try LoopbackPorts.retrying(port: nil) { candidate in
                try Self.writeConfiguration(directory: directory, port: candidate, home: home)
                try Self.writeZones(zones, directory: directory)
                try Self.launch(process, hass: hass, directory: directory)
                do {
                    try Self.waitForAPI(port: candidate, directory: directory, process: process)
                } catch let inUse as LoopbackPorts.AddressInUse {
                    Self.stop(process)
                    throw inUse
                }
                return candidate
            }
        } catch {
            Self.stop(process)
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        startWatchdog()
        let api = ContinuousClock.now - launched
        do {
            try onboard()
            try configFlow("mqtt", ["broker": "127.0.0.1", "port": broker.port])
        } catch {
            stop()
            throw error
        }
        let ready = ContinuousClock.now - launched
        startup = (api.seconds, ready.seconds)
        FileHandle.standardError.write(
            Data(
                ("KeepTrackTesting: Home Assistant \(Self.version) on port \(port): API up in "
                    + "\(String(format: "%.1f", api.seconds)) s, onboarded with MQTT in "
                    + "\(String(format: "%.1f", ready.seconds)) s\n").utf8))
    }

    deinit { stop() }

    // MARK: Start and stop

    static func writeConfiguration(directory: String, port: Int, home: (latitude: Double, longitude: Double)) throws {
        let text = """
            homeassistant:
              name: KeepTrack tests
              latitude: \(home.latitude)
              longitude: \(home.longitude)
              elevation: 0
              unit_system: metric
              time_zone: UTC
              currency: EUR
              country: DE
              internal_url: http://127.0.0.1:\(port)
            http:
              server_host: 127.0.0.1
              server_port: \(port)
            recorder:
              commit_interval: 0
              auto_purge: false
            history:
            logger:
              default: warning
            zone: !include zones.yaml

            """
        try text.write(toFile: directory + "/configuration.yaml", atomically: true, encoding: .utf8)
    }

    static func writeZones(_ zones: [Zone], directory: String) throws {
        var text = zones.isEmpty ? "[]\n" : ""
        for z in zones {
            text += "- name: \(z.name)\n  latitude: \(z.latitude)\n  longitude: \(z.longitude)\n  radius: \(z.radius)\n"
        }
        try text.write(toFile: directory + "/zones.yaml", atomically: true, encoding: .utf8)
    }

    static func launch(_ process: Process, hass: String, directory: String) throws {
        process.executableURL = URL(fileURLWithPath: hass)
        // --skip-pip: everything was installed by tools/setup; nothing is fetched while testing.
        process.arguments = ["-c", directory, "--skip-pip"]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let log = directory + "/stdout.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let out = FileHandle(forWritingAtPath: log)
        process.standardOutput = out ?? FileHandle.nullDevice
        process.standardError = out ?? FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Polls `GET /api/onboarding` every 0.1 s until it answers 200, Home Assistant exits, its log says
    /// its port is taken (``LoopbackPorts/AddressInUse``), or 300 s (times ``hangGuardPatience``) pass (``TimedOut``).
    static func waitForAPI(port: Int, directory: String, process: Process) throws {
        let deadline = ContinuousClock.now + .seconds(300 * hangGuardPatience)
        while ContinuousClock.now < deadline {
            if let r = try? LoopbackHTTP.request("GET", port: port, path: "/api/onboarding", timeout: 5),
                r.status == 200
            {
                return
            }
            let log = (try? String(contentsOfFile: directory + "/home-assistant.log", encoding: .utf8)) ?? ""
            if log.contains("Failed to create HTTP server") {
                throw LoopbackPorts.AddressInUse(port: port, said: lastLines(log))
            }
            // A configuration it refuses, or an integration that cannot be imported: it would serve its
            // recovery page on its default port, not ours.
            if log.contains("Activating recovery mode") {
                throw Failure(description: "Home Assistant started in recovery mode: " + lastLines(log))
            }
            if !process.isRunning {
                throw Failure(
                    description: "Home Assistant exited while starting: "
                        + lastLines(
                            (try? String(contentsOfFile: directory + "/stdout.log", encoding: .utf8)) ?? log))
            }
            usleep(100_000)
        }
        throw TimedOut(
            what: "Home Assistant's API on port \(port) (300 s): "
                + lastLines((try? String(contentsOfFile: directory + "/home-assistant.log", encoding: .utf8)) ?? ""))
    }

    static func lastLines(_ text: String, _ n: Int = 12) -> String {
        text.split(separator: "\n").suffix(n).joined(separator: "\n")
    }

    /// Stops Home Assistant and the broker once this process is gone (a crashed or killed test run).
    private func startWatchdog() {
        let me = getpid()
        let ha = process.processIdentifier
        // The broker's pid as it is then (a restart changes it), from the file it keeps.
        let mosquitto = "$(cat '\(broker.directory)/mosquitto.pid' 2>/dev/null || echo 0)"
        let script =
            "exec </dev/null >/dev/null 2>&1; while [ -d /proc/\(me) ]; do sleep 1; done; b=\(mosquitto); "
            + "grep -q hass /proc/\(ha)/cmdline && kill \(ha); grep -q mosquitto /proc/$b/cmdline && kill $b; sleep 10; "
            + "grep -q hass /proc/\(ha)/cmdline && kill -9 \(ha); grep -q mosquitto /proc/$b/cmdline && kill -9 $b; "
            + "rm -rf '\(directory)' '\(broker.directory)'"
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        watchdog.arguments = ["-f", "/bin/sh", "-c", script]
        watchdog.standardInput = FileHandle.nullDevice
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try? watchdog.run()
    }

    /// Home Assistant's pid.
    public var pid: Int32 { process.processIdentifier }

    /// SIGTERM, up to `grace` seconds for it to go (with MQTT set up it takes about 9 s here), then
    /// SIGKILL; the broker stopped and the directory removed. The default grace is 5 s: nothing of a
    /// throwaway instance needs saving.
    public func stop(grace: Double = 5) {
        Self.stop(process, grace: grace)
        broker.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func stop(_ process: Process, grace: Double = 5) {
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(grace)
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            while process.isRunning { usleep(1000) }
        }
    }

    // MARK: The API

    /// The onboarding's first step: a user, its auth code, a token.
    private func onboard() throws {
        let clientID = "http://127.0.0.1:\(port)/"
        let user = try call(
            "POST", "/api/onboarding/users",
            json: [
                "client_id": clientID, "name": "KeepTrack", "username": "keeptrack", "password": "keeptrack-tests",
                "language": "en",
            ], authorised: false)
        guard let code = (user as? [String: Any])?["auth_code"] as? String else {
            throw Failure(description: "onboarding gave no auth code: \(String(describing: user))")
        }
        try token(form: "grant_type=authorization_code&code=\(code)&client_id=\(clientID)")
    }

    private func token(form: String) throws {
        let r = try LoopbackHTTP.request(
            "POST", port: port, path: "/auth/token",
            headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8))
        guard r.status == 200, let answer = r.json as? [String: Any], let access = answer["access_token"] as? String
        else {
            throw Failure(description: "POST /auth/token answered \(r.status): \(r.text.prefix(300))")
        }
        lock.withLock {
            token = access
            if let refresh = answer["refresh_token"] as? String { refreshToken = refresh }
            tokenIssued = .now
        }
    }

    /// The access token, refreshed when it is older than 20 minutes (they last 30).
    private func bearer() throws -> String {
        let (current, issued, refresh) = lock.withLock { (token, tokenIssued, refreshToken) }
        guard ContinuousClock.now - issued > .seconds(1200) else { return current }
        try token(form: "grant_type=refresh_token&refresh_token=\(refresh)&client_id=http://127.0.0.1:\(port)/")
        return lock.withLock { token }
    }

    /// A request to the API with the token; the answer's JSON.
    /// - Throws: ``Failure`` unless it answers 200 or 201.
    @discardableResult
    public func call(_ method: String, _ path: String, json: Any? = nil, authorised: Bool = true) throws -> Any? {
        var headers: [(String, String)] = [("Content-Type", "application/json")]
        if authorised { headers.append(("Authorization", "Bearer \(try bearer())")) }
        let body = try json.map { Array(try JSONSerialization.data(withJSONObject: $0)) } ?? []
        let r = try LoopbackHTTP.request(method, port: port, path: path, headers: headers, body: body)
        guard r.status == 200 || r.status == 201 else {
            throw Failure(description: "\(method) \(path) answered \(r.status): \(r.text.prefix(500))")
        }
        return r.json
    }

    /// A config flow run to its end (`POST /api/config/config_entries/flow`, then its one form with
    /// `input`); the last answer.
    @discardableResult
    private func configFlow(_ handler: String, _ input: [String: Any]) throws -> [String: Any] {
        let form = try call("POST", "/api/config/config_entries/flow", json: ["handler": handler]) as? [String: Any]
        guard let id = form?["flow_id"] as? String else {
            throw Failure(description: "the \(handler) config flow did not start: \(String(describing: form))")
        }
        let done = try call("POST", "/api/config/config_entries/flow/\(id)", json: input) as? [String: Any]
        guard done?["type"] as? String == "create_entry" else {
            throw Failure(
                description: "the \(handler) config flow did not create an entry: \(String(describing: done))")
        }
        return done ?? [:]
    }

    /// Sets up the OwnTracks integration (once): its webhook's path (`/api/webhook/ID`) and the
    /// secret it decrypts payloads with.
    public func ownTracks() async throws -> (webhookPath: String, secret: String) {
        try await offThePool { [self] in
            try ownTracksLock.withLock {
                if let entry = ownTracksEntry { return entry }
                let done = try configFlow("owntracks", [:])
                let placeholders = done["description_placeholders"] as? [String: Any]
                guard let url = placeholders?["webhook_url"] as? String, let path = url.firstRange(of: "/api/webhook/"),
                    let secretText = placeholders?["secret"] as? String,
                    let secret = secretText.firstMatch(of: /encryption key is ([0-9a-f]+)/)?.output.1
                else {
                    throw Failure(description: "the OwnTracks config flow gave no webhook or secret: \(done)")
                }
                let entry = (String(url[path.lowerBound...]), String(secret))
                ownTracksEntry = entry
                return entry
            }
        }
    }

    /// Replaces the zones (`zones.yaml`) and reloads them (`zone.reload`).
    public func setZones(_ zones: [Zone]) async throws {
        try await offThePool { [self] in
            try Self.writeZones(zones, directory: directory)
            try call("POST", "/api/services/zone/reload", json: [String: Any]())
            lock.withLock { self.zones = zones }
        }
    }

    /// An entity's state, or `nil` when Home Assistant has no such entity.
    public func state(_ entity: String) async throws -> State? {
        try await offThePool { [self] in
            let r = try LoopbackHTTP.request(
                "GET", port: port, path: "/api/states/\(entity)", headers: [("Authorization", "Bearer \(try bearer())")]
            )
            if r.status == 404 { return nil }
            guard r.status == 200, let object = r.json as? [String: Any] else {
                throw Failure(description: "GET /api/states/\(entity) answered \(r.status): \(r.text.prefix(300))")
            }
            return Self.state(object)
        }
    }

    /// Every entity's state.
    public func states() async throws -> [State] {
        try await offThePool { [self] in
            ((try call("GET", "/api/states") as? [[String: Any]]) ?? []).compactMap(Self.state)
        }
    }

    /// Returns once Home Assistant listens on its broker: a probe sensor it discovered (its
    /// configuration retained) shows a value published now, not retained. After a broker restart Home
    /// Assistant reconnects on its own schedule (seconds, longer on a busy machine), and an MQTT
    /// entity's `unavailable` cannot tell: every one reads so while it is away.
    /// - Throws: ``TimedOut`` after `seconds`.
    public func listening(within seconds: Double = 120) async throws {
        let value = UUID().uuidString
        let port = broker.port
        let config =
            #"{"name":"KeepTrack test probe","object_id":"keeptrack_test_probe","unique_id":"keeptrack_test_probe","#
            + #""state_topic":"keeptrack-test/probe"}"#
        _ = try await eventually("Home Assistant listening on its broker again", within: seconds, every: 0.5) {
            try await offThePool {
                try Self.publish(
                    port: port, topic: "homeassistant/sensor/keeptrack_test_probe/config", config, retain: true)
                try Self.publish(port: port, topic: "keeptrack-test/probe", value, retain: false)
            }
            return try await self.state("sensor.keeptrack_test_probe").flatMap { $0.state == value ? true : nil }
        }
    }

    /// `mosquitto_pub` of one message at QoS 1 (blocking until it exits).
    static func publish(port: Int, topic: String, _ payload: String, retain: Bool) throws {
        try MissingTool.check("/usr/bin/mosquitto_pub", packages: "mosquitto-clients")
        let tool = try Tool(
            executable: URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
            ["-h", "127.0.0.1", "-p", String(port), "-q", "1", "-t", topic, "-m", payload] + (retain ? ["-r"] : []))
        tool.guardAgainstHang(seconds: 30)
        tool.drain()
        tool.process.waitUntilExit()
    }

    /// The recorder's states of `entity` from `since` on, oldest first: every change of state or
    /// attributes (`significant_changes_only=0`).
    public func history(_ entity: String, since: Date) async throws -> [State] {
        try await offThePool { [self] in
            let format = ISO8601DateFormatter()
            let start = format.string(from: since.addingTimeInterval(-1))
            let end = format.string(from: Date().addingTimeInterval(3600))
            let path =
                "/api/history/period/\(start)?filter_entity_id=\(entity)&end_time=\(end)&significant_changes_only=0"
            let lists = (try call("GET", path) as? [[[String: Any]]]) ?? []
            return lists.flatMap { $0.compactMap(Self.state) }.filter { $0.entityID == entity }
        }
    }

    static func state(_ object: [String: Any]) -> State? {
        guard let id = object["entity_id"] as? String, let state = object["state"] as? String else { return nil }
        let attributes = ((object["attributes"] as? [String: Any]) ?? [:]).mapValues(Value.init)
        return State(
            entityID: id, state: state, attributes: attributes, lastUpdated: object["last_updated"] as? String ?? "")
    }

    /// The last lines of Home Assistant's log (for a failure's message).
    public func log(lines: Int = 40) -> String {
        Self.lastLines((try? String(contentsOfFile: directory + "/home-assistant.log", encoding: .utf8)) ?? "", lines)
    }
}

/// Polls `probe` every `interval` seconds until it returns a value (returned)
/// or `seconds` times ``hangGuardPatience`` pass (``TimedOut`` naming `what` and the last error `probe`
/// threw): a bounded wait on something another process does, not a sleep standing in for it.
public func eventually<T: Sendable>(
    _ what: String, within seconds: Double, every interval: Double = 0.2,
    _ probe: @escaping @Sendable () async throws -> T?
) async throws -> T {
    let deadline = ContinuousClock.now + .seconds(seconds * hangGuardPatience)
    var last: (any Error)?
    while true {
        do {
            if let value = try await probe() { return value }
        } catch {
            last = error
        }
        if ContinuousClock.now >= deadline {
            throw TimedOut(
                what: "\(what) (\(seconds * hangGuardPatience) s)" + (last.map { ": \($0)" } ?? ""))
        }
        try await Task.sleep(for: .seconds(interval))
    }
}

extension Duration {
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
