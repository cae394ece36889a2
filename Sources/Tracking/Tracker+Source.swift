import Geo
import Lifecycle
import LocationService

/// The source as the location service sees it inside a tracker: each element first passes the
/// lifecycle (the app advanced to its time, launched at the first fix of a replay, suspended
/// sampling, a terminated app ends the input), and between elements the effects of the last one
/// are settled (a suspended sample gives the watch back, the deadline timer is woken).
struct GatedSource<Upstream: FixSource>: FixSource {
    let upstream: Upstream
    let core: TrackerCore

    var name: String { upstream.name }
    var preferredExecutor: (any TaskExecutor)? { upstream.preferredExecutor }

    func makeAsyncIterator() -> Iterator { Iterator(upstream: upstream.makeAsyncIterator(), core: core) }

    struct Iterator: AsyncIteratorProtocol {
        typealias Element = SourceElement
        typealias Failure = Never

        var upstream: Upstream.AsyncIterator
        let core: TrackerCore
        /// When the last fix was taken while suspended (sources that can't release the receiver).
        var lastSample = -Double.infinity
        /// A fix handed on while suspended, at this time: once its events are handled, the watch
        /// goes back unless it woke the app.
        var sampledAt: Double?
        var deadline: Double?

        init(upstream: Upstream.AsyncIterator, core: TrackerCore) {
            self.upstream = upstream
            self.core = core
        }

        mutating func next() async -> SourceElement? {
            settleLast()
            do {
                try core.heartbeatAfterFix()
            } catch {
                core.fail(error)
                return nil
            }
            while true {
                // A graceful shutdown cancels the loop; a replay's source doesn't watch for it.
                if Task.isCancelled { return nil }
                guard let element = await upstream.next(isolation: nil) else { return nil }
                if Task.isCancelled { return nil }
                do {
                    guard let pass = try admit(element) else { continue }
                    return pass
                } catch is Stop {
                    return nil
                } catch {
                    core.fail(error)
                    return nil
                }
            }
        }

        /// The element as it goes on to the location service, `nil` to skip it; throws
        /// ``Stop`` when the app was terminated.
        mutating func admit(_ element: SourceElement) throws -> SourceElement? {
            let app = core.app
            if let e = element.event {
                core.log(source: e)
                if e.kind == .error { core.state.withLock { $0.sourceError = e } }
            }
            if !core.launched {
                guard element.fix != nil else { return nil }
                core.launch()
            }
            let t = core.now()
            if element.fix != nil {
                core.effects.fixArrived(at: t)
                core.metrics.fixes.increment()
            }
            app.advance()
            try core.emitLifecycle()
            if app.state == .terminated { throw Stop() }
            let suspended = app.state == .suspended
            if suspended, element.fix != nil, core.releaser == nil {
                // Sources that cannot let go of the receiver are sampled by time instead.
                if t - lastSample < core.configuration.sampleInterval { return nil }
                lastSample = t
            }
            core.manager.setSuspended(suspended)
            if let e = element.event, e.kind == .released || e.kind == .acquired {
                try core.sink.receive(.source(e))
            }
            if suspended, element.fix != nil { sampledAt = t }
            if element.fix != nil { core.heartbeatFixAdmitted() }
            return element
        }

        /// What follows the last element's events: a suspended sample releases the watch again (and
        /// the timer, which waits for no deadline while the watch is held, looks again for the next
        /// sample's), and the timer looks again when a deadline moved closer.
        mutating func settleLast() {
            let app = core.app
            if let t = sampledAt {
                sampledAt = nil
                if app.state == .suspended {
                    core.effects.sampled(at: t)
                    core.timer.fire()
                }
            }
            let next = app.nextDeadline
            if let next, next < (deadline ?? .infinity) { core.timer.fire() }
            deadline = next
        }
    }

    /// The app was terminated: the input ends (not an error of the tracker's).
    struct Stop: Error {}
}
