// Test support shared by the test targets (and usable by anyone testing against KeepTrack):
// where the package and its fixtures are, running the project's tools, and a hang guard.
import Foundation
import Synchronization

/// The package root, found by walking up from this file to `Package.swift`.
public let packageRoot: URL = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
    }
    fatalError("Package.swift not found above \(#filePath)")
}()

/// The path of a committed fixture (`fixtures/NAME`).
public func fixturePath(_ name: String) -> String {
    packageRoot.appendingPathComponent("fixtures").appendingPathComponent(name).path
}

/// A fixture's bytes.
public func fixtureBytes(_ name: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: fixturePath(name))))
}

public struct TimedOut: Error, CustomStringConvertible {
    public var what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out waiting for \(what)" }
}

/// How many times longer than written a hang guard waits (``withTimeout(_:_:_:)``,
/// ``Tool/guardAgainstHang(seconds:)``): 3, or `KEEPTRACK_TEST_PATIENCE`. A guard only ends a test
/// that hangs; in a full run on 2 cores, a test's async work can wait a minute for a thread of the
/// pool (CI's log showed tests that take a second ending after 160 s), and a guard written for a
/// quiet machine then fails a test that was only slow.
public let hangGuardPatience: Double = {
    guard let text = ProcessInfo.processInfo.environment["KEEPTRACK_TEST_PATIENCE"], let value = Double(text),
        value > 0
    else { return 3 }
    return value
}()

/// Runs `body`, failing with ``TimedOut`` after `seconds` times ``hangGuardPatience``: a guard
/// against hangs, not a synchronisation.
///
/// At the timeout `body` is cancelled and the caller gets ``TimedOut`` at once, without waiting for
/// `body` to end: a body that ignores cancellation (the very hang this guards against) fails the
/// test that waited on it, naming `what`, instead of holding the whole run until CI's own limit.
public func withTimeout<T: Sendable>(
    _ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> T
)
    async throws -> T
{
    let outcome = FirstOutcome<T>()
    let work = Task {
        do { outcome.finish(.success(try await body())) } catch { outcome.finish(.failure(error)) }
    }
    let timer = Task {
        try? await Task.sleep(for: .seconds(seconds * hangGuardPatience))
        if !Task.isCancelled { outcome.finish(.failure(TimedOut(what: what))) }
    }
    defer {
        work.cancel()
        timer.cancel()
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { outcome.wait($0) }
    } onCancel: {
        work.cancel()
    }
}

/// The first of several results, handed to one waiting caller whenever it comes.
private final class FirstOutcome<T: Sendable>: Sendable {
    private let state = Mutex<(waiter: CheckedContinuation<T, any Error>?, result: Result<T, any Error>?)>((nil, nil))

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { s -> CheckedContinuation<T, any Error>? in
            guard s.result == nil else { return nil }
            s.result = result
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(with: result)
    }

    func wait(_ c: CheckedContinuation<T, any Error>) {
        let done = state.withLock { s -> Result<T, any Error>? in
            if s.result == nil { s.waiter = c }
            return s.result
        }
        if let done { c.resume(with: done) }
    }
}

/// A project tool (`tools/...`) run as a child process, read line by line.
public final class Tool: @unchecked Sendable {
    public let process = Process()
    private let out = Pipe()
    private var buffer = Data()
    /// Where the tool's standard error goes: a file, not a pipe of the test runner's (a straggler
    /// must not keep those open), read by ``errors`` to say why a tool failed.
    private let errorPath = NSTemporaryDirectory() + "keeptrack-tool-\(UUID().uuidString).err"

    public convenience init(_ path: String, _ arguments: [String]) throws {
        try self.init(executable: packageRoot.appendingPathComponent(path), arguments)
    }

    /// Runs `executable` in the package root, with `environment` added to this process's.
    public init(executable: URL, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.currentDirectoryURL = packageRoot
        process.standardOutput = out
        // Without the file (a temporary directory that refuses it), the tool's errors go nowhere and
        // `errors()` reads "".
        let errorFile =
            FileManager.default.createFile(atPath: errorPath, contents: nil)
            ? FileHandle(forWritingAtPath: errorPath) : nil
        process.standardError = errorFile ?? FileHandle.nullDevice
        try process.run()
        LiveTools.shared.add(process)
    }

    deinit { try? FileManager.default.removeItem(atPath: errorPath) }

    /// The last `limit` bytes the tool wrote to its standard error so far.
    public func errors(limit: Int = 2000) -> String {
        guard let data = FileManager.default.contents(atPath: errorPath) else { return "" }
        return String(decoding: data.suffix(limit), as: UTF8.self)
    }

    /// Every line until the tool's output ends, read on a thread of its own: a long read on Swift's
    /// cooperative pool holds one of its few threads (as many as cores) for the tool's whole run, and
    /// two such reads at once stall every async test of the run, an endpoint the tool talks to
    /// included (a test then fails on its hang guard, or waits on itself).
    public func remainingLines() async throws -> [String] {
        try await offThePool {
            var lines: [String] = []
            while let line = self.nextLine() { lines.append(line) }
            return lines
        }
    }

    /// The next line the tool prints, read on a thread of its own; `nil` at the end of its output.
    public func line() async throws -> String? {
        try await offThePool { self.nextLine() }
    }

    /// The next line the tool prints (blocking: off the cooperative pool), or `nil` at the end of its
    /// output.
    public func readLine() -> String? {
        expectOffThePool("Tool.readLine()")
        return nextLine()
    }

    private func nextLine() -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...nl)
                return line
            }
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    /// Reads until the tool's output closes. (Foundation's `waitUntilExit` can hang inside Swift
    /// concurrency on Linux; the end of output is the end of the tool.)
    public func drain() {
        expectOffThePool("Tool.drain()")
        while nextLine() != nil {}
    }

    /// Reads lines until one contains `text`; returns it, or `nil` if the output ended first.
    /// Every line read is appended to `seen`.
    public func readLine(containing text: String, seen: inout [String]) -> String? {
        expectOffThePool("Tool.readLine(containing:)")
        while let line = nextLine() {
            seen.append(line)
            if line.contains(text) { return line }
        }
        return nil
    }

    /// Terminates the tool after `seconds` (times ``hangGuardPatience``) if it is still running: a
    /// guard against a test hanging on a line that never comes, not a synchronisation.
    public func guardAgainstHang(seconds: Double) {
        let pid = process.processIdentifier
        let process = self.process
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds * hangGuardPatience) {
            if process.isRunning { kill(pid, SIGKILL) }
        }
    }

    /// SIGTERM, and SIGKILL a second later if the tool is still there; returns at once (a test's
    /// cleanup in a `defer` blocks no thread). ``stop()`` also waits until it has gone.
    public func terminate() {
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        let process = self.process
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) {
            if process.isRunning { kill(pid, SIGKILL) }
        }
    }

    /// ``terminate()``, then waits until the tool has gone (blocking: off the cooperative pool).
    public func stop() {
        expectOffThePool("Tool.stop()")
        terminate()
        while process.isRunning { usleep(1000) }
    }
}

/// The tools still running when the test process exits get SIGKILL. A tool's SIGTERM can be lost:
/// Foundation `Process` children inherit the test process's blocked SIGTERM, and
/// ``Tool/terminate()``'s SIGKILL a second later never comes if the test process has ended by then:
/// `tools/webhook-receiver.py` and Python servers outlived full runs that way.
final class LiveTools: Sendable {
    static let shared: LiveTools = {
        let tools = LiveTools()
        atexit { LiveTools.shared.killAll() }
        return tools
    }()

    private let processes = Mutex<[Process]>([])
    /// The process groups of the gpsfakes started and not stopped yet (``GPSFake``: its starter,
    /// `tools/gpsfake-run`, has exited, so ``processes`` does not hold them).
    private let groups = Mutex<Set<pid_t>>([])

    func add(_ process: Process) {
        processes.withLock { list in
            list.removeAll { !$0.isRunning }
            list.append(process)
        }
    }

    func addGroup(_ leader: pid_t) { _ = groups.withLock { $0.insert(leader) } }

    /// A group stopped: not killed at exit (its numbers may be another's by then).
    func removeGroup(_ leader: pid_t) { _ = groups.withLock { $0.remove(leader) } }

    /// SIGKILL to every tool still running (a child not yet reaped keeps its pid: no other process
    /// can have it), and to every gpsfake's group not stopped yet: ``GPSFake/terminate()`` stops
    /// one on a thread of its own, which the process's end overtakes.
    func killAll() {
        for p in processes.withLock({ $0 }) where p.isRunning { kill(p.processIdentifier, SIGKILL) }
        for leader in groups.withLock({ $0 }) { kill(-leader, SIGKILL) }
    }
}

/// A real gpsd under gpsfake on a free loopback port (`tools/gpsfake-run`).
public struct GPSFake: Sendable {
    public let port: String
    public let pid: String
    public let dir: String

    /// Where Debian puts gpsfake (`gpsd-clients`) and gpsd (`gpsd`).
    public static let gpsfake = "/usr/bin/gpsfake", gpsd = "/usr/sbin/gpsd"

    /// Starts gpsd on `log` (a fixture name), on `port` or a free one (`tools/gpsfake-run` tries
    /// other ports while the one it got is taken).
    /// - Throws: ``MissingTool`` when `gpsfake` or `gpsd` is not installed.
    public static func start(
        _ log: String, port: String? = nil, gpsfake: String = GPSFake.gpsfake,
        gpsd: String = GPSFake.gpsd
    ) throws -> GPSFake {
        try MissingTool.check(gpsfake, packages: "gpsd gpsd-clients")
        try MissingTool.check(gpsd, packages: "gpsd")
        var args = ["start", fixturePath(log), "0.05"]
        if let port { args.append(port) }
        expectOffThePool("GPSFake.start")
        let tool = try Tool("tools/gpsfake-run", args)
        guard let line = tool.readLine() else { throw TimedOut(what: "gpsfake-run start") }
        tool.drain()
        let parts = line.split(separator: " ").map(String.init)
        guard parts.count == 3, let leader = pid_t(parts[1]) else {
            throw TimedOut(what: "gpsfake-run output, got '\(line)'")
        }
        // gpsfake leads its own process group (`setsid`), its gpsd in it: killed at the test
        // process's exit unless stopped before.
        LiveTools.shared.addGroup(leader)
        return GPSFake(port: parts[0], pid: parts[1], dir: parts[2])
    }

    /// Stops gpsfake and its gpsd, and waits until they have gone (blocking: off the cooperative pool).
    public func stop() throws {
        try Self.stop(pid: pid, dir: dir)
    }

    /// Stops gpsfake and its gpsd on a thread of its own; returns at once (a test's cleanup in a
    /// `defer`, where nothing waits for them to be gone). Should the test process end first, its
    /// exit kills them (``LiveTools``).
    public func terminate() {
        let (pid, dir) = (self.pid, self.dir)
        Thread.detachNewThread { try? Self.stop(pid: pid, dir: dir) }
    }

    private static func stop(pid: String, dir: String) throws {
        try Tool("tools/gpsfake-run", ["stop", pid, dir]).drain()
        if let leader = pid_t(pid) { LiveTools.shared.removeGroup(leader) }
    }
}
