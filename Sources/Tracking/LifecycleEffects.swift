import Formats
import Geo
import Lifecycle
import Synchronization

/// A source whose hold on the receiver can be given up while the app is suspended (gpsd's watch),
/// so gpsd may idle the receiver.
public protocol WatchReleasing: Sendable {
    func releaseWatch()
    func acquireWatch()
}

/// The lifecycle's real effects on Linux: the watch released while suspended and taken back for a
/// sample every `sampleInterval` and on a wake; systemd told the state and pinged while fixes
/// arrive.
final class LifecycleEffects: Sendable {
    struct Shared {
        /// When the last fix arrived (on the tracker's clock).
        var lastFix: Double?
        /// Monotonic time of the last watchdog ping.
        var lastPing = -Double.infinity
        /// When to take the watch back for a sample while suspended.
        var nextSample = Double.infinity
    }

    let app: Application
    let notifier: SystemdNotifier?
    let releaser: (any WatchReleasing)?
    let sampleInterval: Double
    let shared = Mutex(Shared())

    init(app: Application, notifier: SystemdNotifier?, releaser: (any WatchReleasing)?, sampleInterval: Double) {
        self.app = app
        self.notifier = notifier
        self.releaser = releaser
        self.sampleInterval = sampleInterval
        app.observe { [weak self] event in self?.perform(event) }
    }

    /// The effect of one lifecycle event.
    func perform(_ event: AppLifecycle.Event) {
        guard case .transition(let t) = event else { return }
        if t.to == .suspended {
            releaser?.releaseWatch()
            let next = t.time + sampleInterval
            shared.withLock { $0.nextSample = next }
        } else if t.from == .suspended {
            shared.withLock { $0.nextSample = .infinity }
            releaser?.acquireWatch()
        }
        notifier?.notify("STATUS=\(statusLine(state: t.to, at: t.time))")
        if t.to == .terminated { notifier?.notify("STOPPING=1") }
    }

    /// Called for every fix: pings the watchdog (at most once a second).
    func fixArrived(at t: Double) {
        let m = monotonicSeconds()
        let ping = shared.withLock { s -> Bool in
            s.lastFix = t
            guard m - s.lastPing >= 1 else { return false }
            s.lastPing = m
            return true
        }
        if ping, let notifier {
            notifier.notify("WATCHDOG=1\nSTATUS=\(statusLine(state: app.state, at: t))")
        }
    }

    /// A fix was sampled while suspended: give the watch up again until the next sample.
    func sampled(at t: Double) {
        guard let releaser else { return }
        releaser.releaseWatch()
        shared.withLock { $0.nextSample = t + sampleInterval }
    }

    /// Takes the watch back when a sample is due; returns the next time to look.
    func sampleIfDue(at t: Double) -> Double? {
        guard releaser != nil, app.state == .suspended else { return nil }
        let due = shared.withLock { s -> Bool in
            guard s.nextSample <= t else { return false }
            s.nextSample = .infinity
            return true
        }
        if due { releaser?.acquireWatch() }
        let next = shared.withLock { $0.nextSample }
        return next.isFinite ? next : nil
    }

    func statusLine(state: AppLifecycle.State, at t: Double) -> String {
        let remaining = app.lifecycle.backgroundTimeRemaining(at: t)
        switch state {
        case .background:
            return remaining == .greatestFiniteMagnitude
                ? "background, running" : "background, \(Int(remaining.rounded())) s of background time left"
        case .suspended: return "suspended: GPS watch released, sampling every \(Int(sampleInterval)) s"
        default: return state.rawValue
        }
    }

    /// The answer to `keeptrack ctl status`, as one JSON object; `inputLost` the input's problem
    /// while it lasts.
    func statusJSON(now t: Double, inputLost: String?) -> String {
        let l = app.lifecycle
        let remaining = l.backgroundTimeRemaining(at: t)
        var out: [UInt8] = []
        func text(_ s: String) { out.append(contentsOf: s.utf8) }
        func number(_ v: Double) { ByteWriting.appendFixed(v, decimals: 3, to: &out) }
        text("{\"state\":\"\(l.state.rawValue)\",\"policy\":\"\(l.policy.name)\",\"modes\":[")
        text(l.modes.names.map { "\"\($0)\"" }.joined(separator: ","))
        text("],\"backgroundTimeRemaining\":")
        if remaining == .greatestFiniteMagnitude { text("null") } else { number(remaining) }
        text(",\"tasks\":[")
        for (i, task) in l.tasks.enumerated() {
            if i > 0 { text(",") }
            text("{\"name\":")
            ByteWriting.appendJSONString(task.name, to: &out)
            text(",\"age\":")
            number(t - task.begun)
            text("}")
        }
        text("],\"lastFixAge\":")
        if let last = shared.withLock({ $0.lastFix }) { number(max(0, t - last)) } else { text("null") }
        text(",\"locationUpdates\":\(l.locationUpdatesActive),\"inputLost\":")
        if let inputLost { ByteWriting.appendJSONString(inputLost, to: &out) } else { text("null") }
        text("}")
        return String(decoding: out, as: UTF8.self)
    }
}
