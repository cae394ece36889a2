import ArgumentParser
import Formats
import SystemIO
import Tracking
#if canImport(Glibc)
    import Glibc
#endif

/// Sends `command` to the tracker's control socket and returns its answer.
///
/// - Throws: a failure (exit 1, not a usage error) that says what to do: start a tracker, or, when the
///   socket is there but not this user's to use, run as the tracker's user.
func controlRequest(_ command: String, at path: String) throws -> String {
    do {
        return try LineClient.request(command, at: path)
    } catch {
        if error.errno == EACCES || error.errno == EPERM {
            throw CommandFailure(
                "the tracker's socket \(path) is not this user's to use (\(error)): run this as the user the "
                    + "tracker runs as (sudo -u keeptrack ...)")
        }
        throw CommandFailure(
            "no tracker answers at \(path) (\(error)). "
                + "Start one with `keeptrack track ...`, or name its socket with --control.")
    }
}

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ctl",
        abstract: "Control a running tracker: move it between foreground and background, or ask its state.",
        discussion: """
            Talks to `keeptrack track` over its control socket (--control; the default is \
            $XDG_RUNTIME_DIR/keeptrack/control.sock, or /tmp/keeptrack-UID/control.sock). Without the \
            socket, signals do the same: SIGUSR1 moves the tracker to the background, SIGUSR2 to the \
            foreground (kill -USR1 PID).

            Examples:
              keeptrack ctl status
              keeptrack ctl background      # the background budget starts counting
              keeptrack ctl foreground
              keeptrack ctl status --json
            """
    )

    @Argument(help: "status, foreground or background.")
    var command: String

    @Option(help: ArgumentHelp("The tracker's control socket.", valueName: "path"))
    var control: String?

    @Flag(help: "Print the status as JSON.")
    var json = false

    func validate() throws {
        if !["status", "foreground", "background"].contains(command) {
            throw ValidationError("Unknown command '\(command)': use status, foreground or background.")
        }
    }

    func run() throws {
        let reply = try controlRequest(command, at: control ?? ControlSocket.defaultPath)
        if json || reply.contains("\"error\"") {
            print(reply, terminator: reply.hasSuffix("\n") ? "" : "\n")
            return
        }
        print(TrackerStatus.describe(reply))
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what a running tracker is doing: its state, fixes, regions, outbox and uploads.",
        discussion: """
            Reads the state and the metrics of `keeptrack track` over its control socket (--control; \
            the default is $XDG_RUNTIME_DIR/keeptrack/control.sock). --prometheus prints the metrics \
            as Prometheus text, for a scraper (e.g. node_exporter's textfile collector).

            Examples:
              keeptrack status
              keeptrack status --prometheus > /var/lib/node_exporter/keeptrack.prom
            """
    )

    @Option(help: ArgumentHelp("The tracker's control socket.", valueName: "path"))
    var control: String?

    @Flag(help: "Print the metrics in Prometheus text format.")
    var prometheus = false

    func run() throws {
        let path = control ?? ControlSocket.defaultPath
        let metrics = try controlRequest("metrics", at: path)
        if prometheus {
            print(metrics, terminator: "")
            return
        }
        let status = try controlRequest("status", at: path)
        print(TrackerStatus.summary(status: status, metrics: metrics))
    }
}
