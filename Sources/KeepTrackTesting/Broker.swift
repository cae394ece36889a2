import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A free TCP port on 127.0.0.1 (bound, read and released: a server started next takes it).
public func freeLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
            bind(fd, p, length)
            return getsockname(fd, p, &length)
        }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A real mosquitto broker (Debian's `mosquitto`) on a free loopback port, with its own
/// configuration file in its own temporary directory, `persistence false`, no system service;
/// stopped by its pid.
public final class Broker: @unchecked Sendable {
    public let port: Int
    public let directory: String
    private var tool: Tool?

    /// Starts one; `configuration` lines are added to the file (`allow_anonymous false`,
    /// `password_file ...`, a TLS listener's files). Returns once it says it runs.
    public init(configuration: [String] = [], port: Int? = nil) throws {
        var template = Array("/tmp/keeptrack-broker-XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        self.port = port ?? freeLoopbackPort()
        let user = getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "root"
        var lines = ["listener \(self.port) 127.0.0.1", "persistence false", "log_dest stderr", "log_type all",
                     "user \(user)"]
        if !configuration.contains(where: { $0.hasPrefix("allow_anonymous") }) { lines.append("allow_anonymous true") }
        lines += configuration
        try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        try start()
    }

    private func start() throws {
        // Its log on standard error (unbuffered, unlike its standard output), read through the pipe.
        let tool = try Tool(executable: URL(fileURLWithPath: "/bin/sh"),
                            ["-c", "exec /usr/sbin/mosquitto -c \"$0\" 2>&1", directory + "/mosquitto.conf"])
        var seen: [String] = []
        guard tool.readLine(containing: " running", seen: &seen) != nil else {
            throw TimedOut(what: "mosquitto to run on port \(port): \(seen.joined(separator: " | "))")
        }
        self.tool = tool
        // Its log goes on to a pipe nobody reads: read it away so that it never blocks the broker.
        Thread.detachNewThread { tool.drain() }
    }

    public var pid: Int32 { tool?.process.processIdentifier ?? 0 }

    /// SIGTERM, and waits until it has gone.
    public func stop() {
        guard let tool else { return }
        tool.terminate()
        while tool.process.isRunning { usleep(1000) }
        self.tool = nil
    }

    /// SIGKILL: gone without a goodbye to its clients.
    public func kill() {
        guard let tool else { return }
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

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// `mosquitto_sub` subscribed to `topic` at QoS 1 on a broker: every message as `QOS TOPIC PAYLOAD`.
public final class Subscriber: @unchecked Sendable {
    private let tool: Tool

    /// Returns once the broker acknowledged the subscription (SUBACK).
    public init(port: Int, topic: String = "#", count: Int? = nil) throws {
        var args = ["-h", "127.0.0.1", "-p", String(port), "-t", topic, "-q", "1", "-d", "-F", "MESSAGE %q %t %p"]
        if let count { args += ["-C", String(count)] }
        // Line-buffered: its standard output to a pipe is block-buffered (the SUBACK line would wait).
        tool = try Tool(executable: URL(fileURLWithPath: "/usr/bin/stdbuf"), ["-oL", "/usr/bin/mosquitto_sub"] + args)
        tool.guardAgainstHang(seconds: 300)
        var seen: [String] = []
        guard tool.readLine(containing: "SUBACK", seen: &seen) != nil else {
            throw TimedOut(what: "mosquitto_sub's SUBACK: \(seen)")
        }
    }

    /// The next message: its QoS, topic and payload; `nil` when mosquitto_sub ended.
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
