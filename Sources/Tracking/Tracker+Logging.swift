import BuildInfo
import Geo
import Lifecycle
import Logging
import Synchronization
import Upload

/// When the outbox's depth deserves a warning: the first time it reaches each level (a tenth, half
/// and nine tenths of its cap by default), and again after it drained below half of that level.
/// A value type: ``observe(_:)`` takes the depth and returns the level just reached, if any.
struct OutboxDepthAlarm: Sendable, Equatable {
    /// The depths that warn, ascending.
    let levels: [Int]
    /// How many levels are currently reached.
    private(set) var reached = 0

    init(cap: Int) {
        levels = Set([cap / 10, cap / 2, cap * 9 / 10].filter { $0 > 0 }).sorted()
    }

    /// The level `depth` just reached (a warning is due), or `nil`.
    mutating func observe(_ depth: Int) -> Int? {
        while reached > 0 && depth < levels[reached - 1] / 2 { reached -= 1 }
        var crossed: Int?
        while reached < levels.count && depth >= levels[reached] {
            crossed = levels[reached]
            reached += 1
        }
        return crossed
    }
}

extension TrackerCore {
    /// Logs the start: the version and what the tracker does, at info (no coordinates, no URL path
    /// or token).
    func logStart() {
        var metadata: Logger.Metadata = [
            "version": "\(BuildInfo.line)",
            "standard-updates": "\(configuration.standardUpdates != nil)",
            "significant-changes": "\(configuration.significantChanges != nil)",
            "visits": "\(configuration.visits != nil)",
            "regions": "\(configuration.regions.count)",
            "policy": "\(configuration.policy.name)",
            "start-in-background": "\(configuration.startInBackground)",
        ]
        if let upload = configuration.upload {
            metadata["upload"] = "\(Uploader.hostOf(upload.uploader.url))"
            metadata["format"] = "\(upload.uploader.format.name)"
        }
        if let outbox { metadata["outbox-waiting"] = "\(outbox.waiting)" }
        logger.info("tracker started", metadata: metadata)
    }

    /// Logs a source's event: lost or failing at warning, the rest at info; a source connected
    /// again after a problem at warning too, so that a log at its default level that said it was
    /// lost also says it came back.
    func log(source e: SourceEvent) {
        let metadata: Logger.Metadata = [
            "source": "\(e.source)", "kind": "\(e.kind.rawValue)", "message": "\(e.message)",
        ]
        switch e.kind {
        case .disconnected, .error:
            state.withLock { $0.sourceLost = e.message }
            logger.warning("source problem", metadata: metadata)
        case .connected where wasLost():
            logger.warning("source back", metadata: metadata)
        case .connected, .released, .acquired, .endOfInput: logger.info("source changed", metadata: metadata)
        }
    }

    /// Whether a source problem was logged since the source last connected; clears it.
    func wasLost() -> Bool {
        state.withLock { s in
            let lost = s.sourceLost != nil
            s.sourceLost = nil
            return lost
        }
    }

    /// Logs a lifecycle transition at info (a termination at warning).
    func log(transition t: AppLifecycle.Transition) {
        let metadata: Logger.Metadata = [
            "from": "\(t.from.rawValue)", "to": "\(t.to.rawValue)", "reason": "\(t.reason)",
        ]
        if t.to == .terminated {
            logger.warning("app terminated", metadata: metadata)
        } else {
            logger.info("lifecycle transition", metadata: metadata)
        }
    }

    /// Warns when the outbox's depth reaches a level of ``OutboxDepthAlarm`` (the endpoint is not
    /// keeping up, or not reachable).
    func checkOutboxDepth(_ outbox: Outbox) {
        let depth = outbox.waiting
        guard let level = depthAlarm.withLock({ $0.observe(depth) }) else { return }
        logger.warning(
            "outbox filling up",
            metadata: [
                "waiting": "\(depth)", "level": "\(level)", "cap": "\(outbox.configuration.maxCount)",
                "last-error": "\(uploads?.stats?.lastError ?? "none")",
            ])
    }
}
