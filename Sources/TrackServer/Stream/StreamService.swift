import EndpointEvents
import Geo
import Logging
import ServiceLifecycle
import TrackStore

/// The live stream's part of the server's service group: feeds the stream from the store while the
/// server runs (what any route stored, ``StoredRecordsSource``, and the stops and trips found at
/// ingest), declares devices offline (and online again) on the server's clock (``OfflineWatch``); at
/// the group's graceful shutdown, ends every stream.
struct StreamService: Service {
    let store: any TrackStore
    let hub: StreamHub
    let watch: OfflineWatch
    /// The waits of a store that reconnects to follow others (PostgreSQL's listener).
    let clock: any EpochClock
    let logger: Logger

    func run() async throws {
        let hub = self.hub
        defer { hub.closeAll() }
        let watch = self.watch
        let store = self.store
        // The records only while a client may see them; the watch needs only who sent.
        let subscription = store.storedRecords.subscribe(
            needsRecords: { hub.hasClients }, devices: { watch.stored(devices: $0) }, records: { watch.stored($0) })
        let metrics = hub.metrics
        let reports = store.storedRecords.observe { report in
            switch report {
            case .failed: metrics.followFailures.increment()
            case .caughtUp(let records): metrics.caughtUp.increment(by: Int64(records))
            }
        }
        // Stops and trips the store found at ingest, as events (each instance its own on PostgreSQL).
        let found = store.stopEvents.subscribe { events in
            hub.publish(
                events: events.map { e in
                    switch e.kind {
                    case .stop(let visit): StreamEvent(device: e.device, kind: .stop(visit, decided: e.decided))
                    case .trip(let trip): StreamEvent(device: e.device, kind: .trip(trip, decided: e.decided))
                    }
                })
        }
        // The outlier marks the detectors changed: a live map takes the points out of its line (or puts
        // them back), in events of at most `outlierPoints` points (a backlog's run may mark thousands).
        let marks = store.outlierMarks.subscribe { runs in
            hub.publish(events: runs.flatMap { Self.events($0) })
        }
        // The events stored at ingest; stops and trips are told above already (`stop`, `trip`), and
        // presence by the offline watch (`offline`, `online`).
        let stored = store.deviceEvents.subscribe { events in
            hub.publish(
                events: events.filter { ![.stopEnd, .tripEnd, .offline, .online].contains($0.kind) }.map {
                    StreamEvent(device: $0.device, kind: .event($0))
                })
        }
        defer {
            store.deviceEvents.unsubscribe(stored)
            store.storedRecords.unsubscribe(subscription)
            store.storedRecords.unsubscribe(reports)
            store.stopEvents.unsubscribe(found)
            store.outlierMarks.unsubscribe(marks)
        }
        let clock = self.clock
        let logger = self.logger
        let follow = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // The devices known so far: online or offline, without an event.
                    if let known = try? await store.latest(device: nil) { watch.seed(known) }
                    await watch.run()
                }
                group.addTask {
                    do { try await store.followStored(clock: clock) } catch {
                        // Cancelled: the server stops (the listening connection's error says only that).
                        guard !Task.isCancelled, !(error is CancellationError) else { return }
                        logger.error(
                            "the live stream stopped following the store",
                            metadata: ["error.type": "\(type(of: error))"])
                    }
                }
            }
        }
        try? await gracefulShutdown()
        follow.cancel()
    }

    /// The most points (marked and cleared) one `outliers` event names: about 100 bytes each.
    static let outlierPoints = 500

    /// A run's outlier marks as `outliers` events of at most ``outlierPoints`` points each, in time order.
    static func events(_ marks: OutlierMarks) -> [StreamEvent] {
        var out: [StreamEvent] = []
        var rest = (marks.marked[...], marks.cleared[...])
        repeat {
            let marked = rest.0.prefix(outlierPoints)
            let cleared = rest.1.prefix(outlierPoints - marked.count)
            rest = (rest.0.dropFirst(marked.count), rest.1.dropFirst(cleared.count))
            var part = marks
            (part.marked, part.cleared) = (Array(marked), Array(cleared))
            out.append(StreamEvent(device: marks.device, kind: .outliers(part)))
        } while !rest.0.isEmpty || !rest.1.isEmpty
        return out
    }
}
