import Formats
import Geo
import MQTT

extension Uploader {
    /// One batch to Home Assistant by MQTT discovery (``HomeAssistantFormat``): the device announced
    /// on each new connection, positions held while ``HomeAssistantGate`` says Home Assistant cannot
    /// be listening, then every record's messages at QoS 1; a record is acknowledged in the outbox
    /// when the broker acknowledged all its messages, the rest stay for the next attempt.
    ///
    /// The connection stays open while Home Assistant is offline (its status is read on it): the
    /// attempt ends after ``Configuration/timeout`` and is retried with the usual backoff.
    func publish(_ batch: [TrailRecord], via publisher: MQTTPublisher, to lane: HomeAssistantLane) async -> Attempt {
        let connection: MQTTConnection
        do {
            connection = try await publisher.connection()
        } catch {
            return Self.attempt(connecting: error)
        }
        lane.use(connection, now: clock.now.secondsSince1970)
        let giveUp = clock.now.secondsSince1970 + configuration.timeout
        gate: while true {
            if Task.isCancelled { return .retry(after: nil, reason: "cancelled: the background time ran out") }
            if let lost = connection.failure {
                await publisher.reset()
                return .retry(after: nil, reason: lost.message)
            }
            let now = clock.now.secondsSince1970
            switch lane.decide(now: now) {
            case .publish:
                break gate
            case .announce:
                let messages = lane.announcement()
                var mids: [Int32] = []
                do {
                    for m in messages { mids.append(try connection.publish(m)) }
                } catch {
                    await publisher.reset()
                    return .retry(after: nil, reason: error.message)
                }
                let acknowledged = await connection.acknowledgements(of: mids, timeout: configuration.timeout)
                guard acknowledged.count == mids.count else {
                    await publisher.reset()
                    return .retry(
                        after: nil,
                        reason: "no PUBACK from the MQTT broker \(publisher.endpoint) for the Home Assistant "
                            + "discovery configuration within \(Int(configuration.timeout)) s")
                }
                lane.announced(now: clock.now.secondsSince1970)
            case .wait(let until):
                // A bounded wait (settling, a birth message after a reconnection) runs to its end; Home
                // Assistant's offline ends the attempt after the timeout, the records staying.
                if until == nil && now >= giveUp {
                    return .retry(
                        after: nil,
                        reason: "Home Assistant is offline (it said so on \(lane.topics.status)): the records wait "
                            + "in the outbox until it says online")
                }
                let deadline = until ?? giveUp
                await lane.signal.wait(until: EpochInstant(secondsSince1970: deadline), on: clock)
            }
        }
        var published: [(mids: [Int32], record: TrailRecord)] = []
        var skipped: [TrailRecord] = []
        var visitSensor: Int32?
        var failure: String?
        publishing: for r in batch {
            let messages = lane.messages(for: r)
            if messages.isEmpty {
                skipped.append(r)
                continue
            }
            var mids: [Int32] = []
            for m in messages {
                do {
                    let mid = try connection.publish(m)
                    if m.topic == lane.topics.visitConfig { visitSensor = mid }
                    mids.append(mid)
                } catch {
                    failure = error.message
                    break publishing
                }
            }
            published.append((mids, r))
        }
        let acknowledged = await connection.acknowledgements(
            of: published.flatMap(\.mids), timeout: configuration.timeout)
        if let visitSensor, acknowledged.contains(visitSensor) { lane.visitSensorAnnounced() }
        // In order: a record whose messages are all acknowledged, up to the first that is not.
        let stored = published.prefix { $0.mids.allSatisfy(acknowledged.contains) }.map(\.record)
        if !stored.isEmpty || !skipped.isEmpty {
            if case .retry(let after, let reason) = acknowledge(
                stored + skipped, skipped: skipped.count, requests: stored.count)
            {
                await publisher.reset()
                return .retry(after: after, reason: reason)
            }
        }
        guard stored.count < published.count || failure != nil else { return .done }
        let lost = connection.failure
        await publisher.reset()
        if let failure { return .retry(after: nil, reason: failure) }
        if Task.isCancelled { return .retry(after: nil, reason: "cancelled: the background time ran out") }
        if let lost { return .retry(after: nil, reason: lost.message) }
        return .retry(
            after: nil,
            reason: "no PUBACK from the MQTT broker \(publisher.endpoint) for "
                + "\(published.count - stored.count) of \(published.count) records within \(Int(configuration.timeout)) s"
        )
    }
}
