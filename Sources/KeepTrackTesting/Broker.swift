import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real mosquitto broker (Debian's `mosquitto`) on a free loopback port, with its own
/// configuration file in its own temporary directory, `persistence false`, no system service;
/// stopped by its pid.
public final class Broker: @unchecked Sendable {
    public let port: Int
    public let directory: String
    private var tool: Tool?

    /// Where Debian's `mosquitto` package puts the broker.
    public static let executable = "/usr/sbin/mosquitto"
    private let executable: String

    /// Starts one; `configuration` lines are added to the file (`allow_anonymous false`,
    /// `password_file ...`, a TLS listener's files). Returns once it says it runs. Without `port`, it
    /// starts on a candidate port and tries another while the one it got is taken.
    /// - Throws: ``MissingTool`` when `executable` is not installed, ``PortError`` when every port
    ///   tried was taken, ``TimedOut`` when it did not run.
    public init(configuration: [String] = [], port: Int? = nil, executable: String = Broker.executable) throws {
        try MissingTool.check(executable, packages: "mosquitto")
        expectOffThePool("starting mosquitto")
        let temporary = try TemporaryDirectory("keeptrack-broker")
        let directory = temporary.path
        let user = getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "root"
        do {
            (self.port, tool) = try LoopbackPorts.retrying(port: port) { candidate in
                var lines = [
                    "listener \(candidate) 127.0.0.1", "persistence false", "log_dest stderr", "log_type all",
                    "user \(user)",
                ]
                if !configuration.contains(where: { $0.hasPrefix("allow_anonymous") }) {
                    lines.append("allow_anonymous true")
                }
                lines += configuration
                try (lines.joined(separator: "\n") + "\n")
                    .write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
                return (candidate, try Self.launch(executable, directory: directory, port: candidate))
            }
        } catch {
            temporary.remove()
            throw error
        }
        self.directory = directory
        self.executable = executable
    }

    /// Starts mosquitto on the configuration in `directory`; returns once it says it runs.
    private static func launch(_ executable: String, directory: String, port: Int) throws -> Tool {
        // Its log on standard error (unbuffered, unlike its standard output), read through the pipe.
        let tool = try Tool(
            executable: URL(fileURLWithPath: "/bin/sh"),
            ["-c", "exec \"$1\" -c \"$0\" 2>&1", directory + "/mosquitto.conf", executable])
        var seen: [String] = []
        guard tool.readLine(containing: " running", seen: &seen) != nil else {
            let said = seen.joined(separator: " | ")
            if said.contains("Address already in use") { throw LoopbackPorts.AddressInUse(port: port, said: said) }
            throw TimedOut(what: "mosquitto to run on port \(port): \(said)")
        }
        // Its log goes on to a pipe nobody reads: read it away so that it never blocks the broker.
        Thread.detachNewThread { tool.drain() }
        // Its current pid, for a watchdog that outlives the test process (a restart changes it).
        try? "\(tool.process.processIdentifier)\n".write(
            toFile: directory + "/mosquitto.pid", atomically: true, encoding: .utf8)
        return tool
    }

    /// Starts it again after ``stop()``, on the same port with the same configuration.
    public func start() throws {
        guard tool == nil else { return }
        tool = try Self.launch(executable, directory: directory, port: port)
    }

    public var pid: Int32 { tool?.process.processIdentifier ?? 0 }

    /// SIGTERM, and waits until it has gone (blocking: off the cooperative pool).
    public func stop() {
        guard let tool else { return }
        tool.stop()
        self.tool = nil
    }

    /// SIGKILL: gone without a goodbye to its clients. Waits until it has gone (blocking: off the
    /// cooperative pool).
    public func kill() {
        guard let tool else { return }
        expectOffThePool("Broker.kill()")
        Glibc.kill(tool.process.processIdentifier, SIGKILL)
        while tool.process.isRunning { usleep(1000) }
        self.tool = nil
    }

    /// Starts it again on the same port with the same configuration.
    public func restart() throws {
        stop()
        try start()
    }

    /// SIGSTOP: it keeps its connections open and answers nothing until ``resume()``.
    public func pause() { Glibc.kill(pid, SIGSTOP) }

    /// SIGCONT.
    public func resume() { Glibc.kill(pid, SIGCONT) }

    /// Stopped without waiting: the last reference may go on any thread.
    deinit {
        tool?.terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// `mosquitto_sub` subscribed to `topic` at QoS 1 on a broker: every message as `QOS TOPIC PAYLOAD`.
public final class Subscriber: @unchecked Sendable {
    private let tool: Tool

    /// Returns once the broker acknowledged the subscription (SUBACK).
    public init(port: Int, topic: String = "#", count: Int? = nil) throws {
        expectOffThePool("starting mosquitto_sub")
        var args = ["-h", "127.0.0.1", "-p", String(port), "-t", topic, "-q", "1", "-d", "-F", "MESSAGE %q %t %p"]
        if let count { args += ["-C", String(count)] }
        // Line-buffered: its standard output to a pipe is block-buffered (the SUBACK line would wait).
        try MissingTool.check("/usr/bin/mosquitto_sub", packages: "mosquitto-clients")
        tool = try Tool(executable: URL(fileURLWithPath: "/usr/bin/stdbuf"), ["-oL", "/usr/bin/mosquitto_sub"] + args)
        tool.guardAgainstHang(seconds: 300)
        var seen: [String] = []
        guard tool.readLine(containing: "SUBACK", seen: &seen) != nil else {
            throw TimedOut(what: "mosquitto_sub's SUBACK: \(seen)")
        }
    }

    /// The next message: its QoS, topic and payload; `nil` when mosquitto_sub ended (blocking: off
    /// the cooperative pool).
    public func next() -> (qos: Int, topic: String, payload: String)? {
        while let line = tool.readLine() {
            guard line.hasPrefix("MESSAGE ") else { continue }
            let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
            guard parts.count == 4 else { continue }
            return (Int(parts[1]) ?? -1, String(parts[2]), String(parts[3]))
        }
        return nil
    }

    public func stop() { tool.terminate() }

    deinit { tool.terminate() }
}
