import Formats
import Geo
import LocationService
import ServiceLifecycle
import SystemIO

#if canImport(Glibc)
    import Glibc
#endif

/// The write end of the control socket's wake pipe, for the signal handlers.
nonisolated(unsafe) private var signalPipe: Int32 = -1

/// A running tracker's control socket, as a service of its group (`keeptrack ctl`, `keeptrack
/// status`): one line per connection — `status`, `foreground` or `background` (answered with the
/// status after the change, one JSON object), `metrics` (Prometheus text) or `state ID` (a
/// monitored region's current state, `{"region":ID,"state":"inside"|"outside"|"unknown"}`, like
/// CLLocationManager's `requestState(for:)`). SIGUSR1 sends the
/// tracker to the background and SIGUSR2 to the foreground. A graceful shutdown closes the socket
/// and removes its file.
public final class ControlSocket: Service, Sendable {
    let server: LineServer
    let tracker: Tracker
    let metrics: @Sendable () -> String

    /// The default path: `$XDG_RUNTIME_DIR/keeptrack/control.sock`, or `/tmp/keeptrack-UID/control.sock`.
    public static var defaultPath: String {
        if let dir = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !dir.isEmpty {
            return dir + "/keeptrack/control.sock"
        }
        return "/tmp/keeptrack-\(getuid())/control.sock"
    }

    /// Listens at `path` now (so a second tracker on the same socket fails at start).
    ///
    /// - Parameters:
    ///   - path: the Unix socket's path (``defaultPath`` is the command line's default).
    ///   - tracker: the tracker whose state, lifecycle and regions the socket answers for.
    ///   - metrics: the metrics as Prometheus text. The default is ``Telemetry/prometheusText()``.
    /// - Throws: ``TrackerError`` saying why the socket can't be served.
    public init(path: String, tracker: Tracker, metrics: @escaping @Sendable () -> String = Telemetry.prometheusText)
        throws(TrackerError)
    {
        do {
            server = try LineServer(path: path)
        } catch {
            throw TrackerError(.controlSocket, "control socket", path: path, underlying: error)
        }
        self.tracker = tracker
        self.metrics = metrics
    }

    public func run() async throws {
        signalPipe = server.wakePipe.writeFD
        signal(SIGUSR1) { _ in
            var b = UInt8(ascii: "1")
            _ = write(signalPipe, &b, 1)
        }
        signal(SIGUSR2) { _ in
            var b = UInt8(ascii: "2")
            _ = write(signalPipe, &b, 1)
        }
        let finished = Signal()
        server.start(
            handler: { [self] in answer($0) },
            onWake: { [tracker] byte in
                if byte == UInt8(ascii: "1") { tracker.enterBackground() }
                if byte == UInt8(ascii: "2") { tracker.enterForeground() }
            }, finished: { finished.fire() })
        try? await gracefulShutdown()
        server.stop()
        await finished.wait()
    }

    func answer(_ command: String) -> String {
        switch command {
        case "status": return tracker.statusJSON()
        case "background":
            tracker.enterBackground()
            return tracker.statusJSON()
        case "foreground":
            tracker.enterForeground()
            return tracker.statusJSON()
        case "metrics":
            tracker.refreshGauges()
            return metrics()
        case _ where command.hasPrefix("state "):
            let id = String(command.dropFirst(6))
            var out: [UInt8] = []
            if let state = tracker.state(ofRegion: id) {
                ByteWriting.appendStatic("{\"region\":", to: &out)
                ByteWriting.appendJSONString(id, to: &out)
                ByteWriting.appendStatic(",\"state\":", to: &out)
                ByteWriting.appendJSONString(state.rawValue, to: &out)
                out.append(UInt8(ascii: "}"))
                return String(decoding: out, as: UTF8.self)
            }
            EventJSON.appendStringObject(["error": "no monitored region with id \(id)"], to: &out)
            return String(decoding: out.dropLast(), as: UTF8.self)
        default:
            var out: [UInt8] = []
            EventJSON.appendStringObject(
                ["error": "unknown command '\(command)': use status, metrics, foreground, background or state ID"],
                to: &out)
            return String(decoding: out.dropLast(), as: UTF8.self)
        }
    }
}
