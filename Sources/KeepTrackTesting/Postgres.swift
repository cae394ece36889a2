import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL 15 + PostGIS cluster (Debian's `postgresql-15 postgresql-15-postgis-3`),
/// never the system service: `initdb` into its own temporary directory, the server on a free
/// loopback port and a Unix socket in that directory, a template database with PostGIS from which
/// each test's database is copied (``createDatabase()``); stopped by its pid.
///
/// initdb and postgres refuse to run as root: as root, every command runs as the `postgres` user
/// (`runuser`), and the directory is theirs. A watchdog (a shell of the same user) stops the
/// cluster and removes its directory once this process is gone, however it ended.
///
/// ``shared()`` is the one cluster of a test process; a test that stops or restarts the server
/// starts its own.
public final class Postgres: @unchecked Sendable {
    public static let bin = "/usr/lib/postgresql/15/bin"
    /// The directory of `initdb`, `pg_ctl` and `postgres` this cluster runs (``bin`` unless told).
    public let binDirectory: String
    /// The server's port: the one asked for, or the first candidate that was not taken.
    public private(set) var port: Int
    /// The cluster's directory: `data/`, `log`, and the Unix socket `.s.PGSQL.PORT`.
    public let directory: String
    /// The superuser (trust authentication on loopback and the socket).
    public let user = "kt"
    private let lock = NSLock()
    private var databases = 0

    nonisolated(unsafe) private static var sharedCluster: Postgres?
    private static let sharedLock = NSLock()

    /// The test process's cluster, started on first use (a few seconds), on a thread of its own.
    public static func shared() async throws -> Postgres {
        try await offThePool {
            try sharedLock.withLock {
                if let cluster = sharedCluster { return cluster }
                let cluster = try Postgres(settings: ["fsync=off", "synchronous_commit=off", "full_page_writes=off"])
                sharedCluster = cluster
                return cluster
            }
        }
    }

    /// Creates and starts a cluster; `settings` are `postgres -c` settings (`fsync=off`...). Without
    /// `port`, it starts on a candidate port and tries another while the one it got is taken.
    /// Returns once it accepts connections and the template database has PostGIS.
    /// - Throws: ``MissingTool`` when `bin` has no `initdb` or `pg_ctl` (PostgreSQL 15 is not
    ///   installed), ``PortError`` when every port tried was taken, ``CommandFailed``.
    public init(settings: [String] = [], port: Int? = nil, bin: String = Postgres.bin) throws {
        let packages = "postgresql-15 postgresql-15-postgis-3"
        try MissingTool.check(bin + "/initdb", packages: packages)
        try MissingTool.check(bin + "/pg_ctl", packages: packages)
        binDirectory = bin
        // Removed by destroy() or the watchdog, once the server has stopped (not while it runs).
        directory = try TemporaryDirectory("keeptrack-pg", removedAtExit: false).path
        self.port = port ?? 0
        self.settings =
            [
                "listen_addresses=127.0.0.1", "unix_socket_directories=\(directory)", "max_connections=400",
                "shared_buffers=64MB",
            ] + settings
        if getuid() == 0 {
            let pw = try Self.run("/usr/bin/id", ["-u", "postgres"]).trimmingCharacters(in: .whitespacesAndNewlines)
            let gid = try Self.run("/usr/bin/id", ["-g", "postgres"]).trimmingCharacters(in: .whitespacesAndNewlines)
            chown(directory, uid_t(pw) ?? 0, gid_t(gid) ?? 0)
        }
        chmod(directory, 0o700)
        _ = try asOwner(
            "\(bin)/initdb",
            [
                "-D", directory + "/data", "-U", user, "--auth=trust", "-E", "UTF8",
                "--locale=C.UTF-8", "--no-sync",
            ])
        do {
            self.port = try LoopbackPorts.retrying(port: port) { candidate in
                try start(on: candidate)
                return candidate
            }
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        // Stops the cluster once this process is gone (kill -0 can't see a root process from another user).
        let watchdog =
            "exec </dev/null >/dev/null 2>&1; while [ -d /proc/\(getpid()) ]; do sleep 1; done; "
            + "\(bin)/pg_ctl -D '\(directory)/data' -m immediate stop; rm -rf '\(directory)'"
        _ = try asOwner("/usr/bin/setsid", ["-f", "/bin/sh", "-c", watchdog])
        _ = try psql("CREATE DATABASE kt_template", database: "postgres")
        _ = try psql("CREATE EXTENSION postgis", database: "kt_template")
    }

    private let settings: [String]

    /// `pg_ctl start`, waiting until it accepts connections.
    public func start() throws {
        try start(on: port)
    }

    /// `pg_ctl start` on `port`; ``LoopbackPorts/AddressInUse`` when its log says the port is taken.
    private func start(on port: Int) throws {
        let log = directory + "/log"
        let logged = (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
        let options = settings.map { "-c \($0)" }.joined(separator: " ") + " -p \(port)"
        do {
            _ = try asOwner(
                "\(binDirectory)/pg_ctl",
                [
                    "-D", directory + "/data", "-l", log, "-w", "-t", "60",
                    "-o", options, "start",
                ])
        } catch {
            let said = FileManager.default.contents(atPath: log)
                .map { String(decoding: $0.dropFirst(logged), as: UTF8.self) }
            if let said, said.contains("Address already in use") {
                throw LoopbackPorts.AddressInUse(port: port, said: said)
            }
            throw error
        }
    }

    /// `pg_ctl stop -m fast` (connections closed, a clean shutdown), waiting until it has stopped.
    public func stop() throws {
        _ = try asOwner("\(binDirectory)/pg_ctl", ["-D", directory + "/data", "-m", "fast", "-w", "stop"])
    }

    /// Stops and starts it again on the same port.
    public func restart() throws {
        try stop()
        try start()
    }

    /// The server's pid (`postmaster.pid`'s first line), or 0.
    public var pid: Int32 {
        guard let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8) else {
            return 0
        }
        return Int32(text.split(separator: "\n").first ?? "") ?? 0
    }

    /// SIGKILL to the postmaster: its backends end at once, and the next start recovers from the WAL.
    public func kill() {
        let pid = self.pid
        guard pid > 0 else { return }
        Glibc.kill(pid, SIGKILL)
        // Gone, or a zombie nobody reaps (its parent was pg_ctl's shell).
        while let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            !stat.contains(") Z ")
        { usleep(1000) }
    }

    /// Stops it at once (`pg_ctl stop -m immediate`) and removes its directory.
    public func destroy() {
        _ = try? asOwner("\(binDirectory)/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A new database copied from the template (PostGIS in it), named `kt_N`.
    public func createDatabase() throws -> String {
        let name = lock.withLock {
            databases += 1
            return "kt_\(databases)"
        }
        _ = try psql("CREATE DATABASE \(name) TEMPLATE kt_template", database: "postgres")
        return name
    }

    /// Drops `name`, closing whatever is still connected to it.
    public func dropDatabase(_ name: String) throws {
        _ = try psql("DROP DATABASE IF EXISTS \(name) WITH (FORCE)", database: "postgres")
    }

    /// The URL of `database` over TCP on 127.0.0.1 (TLS off: the test server has none).
    public func url(_ database: String) -> String {
        "postgres://\(user)@127.0.0.1:\(port)/\(database)?sslmode=disable"
    }

    /// The URL of `database` over the Unix socket in ``directory``.
    public func socketURL(_ database: String) -> String {
        "postgres://\(user)@:\(port)/\(database)?host=\(directory)"
    }

    /// Runs `sql` with `psql` (stopping at the first error); returns what it printed (unaligned, no
    /// headers: one row a line, columns separated by `|`).
    public func psql(_ sql: String, database: String) throws -> String {
        try Self.run(
            "/usr/bin/psql",
            [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", String(port),
                "-U", user, "-d", database, "-c", sql,
            ])
    }

    /// `executable` with `arguments` as the cluster's owner: `runuser -u postgres --` when root.
    private func ownerCommand(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        getuid() == 0
            ? ("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments) : (executable, arguments)
    }

    private func asOwner(_ executable: String, _ arguments: [String]) throws -> String {
        let (e, a) = ownerCommand(executable, arguments)
        return try Self.run(e, a)
    }

    public struct CommandFailed: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs a command to its end; its standard output, or ``CommandFailed`` with its standard error.
    /// Its exit status comes back on standard error through a shell (Foundation's `waitUntilExit` can
    /// hang on Linux off the main thread: the end of output is the end of the command).
    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        expectOffThePool("running \(executable) for the PostgreSQL cluster")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "\"$@\"; echo \"exit:$?\" >&2", "sh", executable] + arguments
        p.currentDirectoryURL = URL(fileURLWithPath: "/tmp")
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        // Standard output to its end, then standard error (these commands write little there).
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let status = errors.components(separatedBy: "exit:").last.flatMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard status == 0 else {
            throw CommandFailed(
                description: "\(executable) \(arguments.joined(separator: " ")) exited with "
                    + "\(status.map(String.init) ?? "?"): \(errors)")
        }
        return String(decoding: output, as: UTF8.self)
    }
}
