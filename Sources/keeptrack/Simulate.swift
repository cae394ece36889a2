import ArgumentParser
import Formats
import GPSInput
import Geo
import Lifecycle
import Tracking

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Simulate how long a tracking app keeps running in the background, and why it stops.",
        discussion: """
            Runs the background-budget model (docs/background.md) on a virtual clock: \
            the app is sent to the background at the start of a motion, and each strategy tries to \
            keep it running under each policy. Nothing waits: an hour takes milliseconds.

            Strategies: none; task (one background task, ended by its expiration handler); \
            task-restart (a new task begun in every expiration handler); unended-task (a task never \
            ended); location (standard updates with the location mode); location-pulse (location mode, \
            a task, location on 1 s every 60 s); significant-change (suspended, woken by each ≥ 500 m \
            move, an upload in a 2 s task per wake); visits (suspended, woken by each visit's arrival \
            and departure, an upload in a 2 s task per wake); audio (continuous playback).

            The motion is a synthetic commute (10 minutes still, 5 minutes at 10 m/s, repeated) \
            unless --fixture gives an NMEA log.

            Examples:
              keeptrack simulate          # every strategy under every policy, 1 hour
              keeptrack simulate --policy ios13 --strategy location-pulse
              keeptrack simulate --fixture fixtures/day-24h.nmea.gz \\
                --strategy significant-change
              keeptrack simulate --budget 60 --grace 2 --json     # a custom policy
            """
    )

    @OptionGroup(title: "Policy (the default here is all: ios6, ios7 and ios13)")
    var policyOptions: PolicyOptions

    @Option(help: ArgumentHelp("One strategy, or all.", valueName: "name"))
    var strategy: String = "all"

    @Option(
        help: ArgumentHelp(
            "How long to simulate (3600, 1h, 90m). Default: 1h, or the whole --fixture.",
            valueName: "duration"), transform: DurationText.parse)
    var duration: Double?

    @Option(help: ArgumentHelp("Take the motion from this NMEA log.", valueName: "file"))
    var fixture: String?

    @Flag(help: "Print JSON Lines, one object per policy and strategy.")
    var json = false

    func validate() throws {
        if strategy != "all" && Strategy(rawValue: strategy) == nil {
            throw ValidationError(
                "--strategy must be all or one of "
                    + Strategy.allCases.map(\.rawValue).joined(separator: ", ") + ", got '\(strategy)'.")
        }
        if let duration, !(duration > 0 && duration.isFinite) {
            throw ValidationError("--duration must be more than 0s.")
        }
    }

    func run() async throws {
        let policies = try policyOptions.policies(allowAll: true, default: "all")
        let strategies = strategy == "all" ? Strategy.allCases : [Strategy(rawValue: strategy)!]
        let profile = try await motion()
        var results: [SimulationResult] = []
        for p in policies {
            for s in strategies {
                results.append(try await BudgetSimulation(policy: p, strategy: s, profile: profile).run())
            }
        }
        var out = OutputBuffer()
        let times = profile.fixes.compactMap { $0.time?.secondsSince1970 }
        out.append(
            json
                ? Self.jsonLines(results)
                : Self.table(results, duration: times.last! - times.first!, motion: profile.name))
        try out.flush()
    }

    func motion() async throws -> MotionProfile {
        guard let fixture else { return .commute(duration: duration ?? 3600) }
        do {
            return try await MotionProfile.recorded(
                NMEALogSource(options: .init(path: fixture)), name: fixture,
                duration: duration)
        } catch {
            throw ValidationError("--fixture: \(error) (\(fixture))")
        }
    }
}

extension Simulate {
    /// One JSON object per result: `{"policy":...,"strategy":...,"ran":S,"duration":S,"firstStop":S|null,
    /// "finalState":...,"wakes":N,"suspensions":N,"refreshes":N,"why":...}`.
    static func jsonLines(_ results: [SimulationResult]) -> String {
        var out: [UInt8] = []
        for r in results {
            // One literal, not a sum of them: the sum took the type checker 26 s (2026-11-30).
            let firstStop: String = r.firstStop.map { String(Int($0.rounded())) } ?? "null"
            let fields: String = """
                {"policy":"\(r.policy)","strategy":"\(r.strategy.rawValue)",\
                "ran":\(Int(r.ran.rounded())),"duration":\(Int(r.duration.rounded())),\
                "firstStop":\(firstStop),"finalState":"\(r.finalState.rawValue)","wakes":\(r.wakes),\
                "suspensions":\(r.suspensions),"refreshes":\(r.refreshes),"why":
                """
            out.append(contentsOf: fields.utf8)
            ByteWriting.appendJSONString(why(r), to: &out)
            out.append(contentsOf: "}\n".utf8)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The field table: a line about the motion, then one row per result.
    static func table(_ results: [SimulationResult], duration: Double, motion: String) -> String {
        var out = "\(grouped(Int(duration))) s of \(motion), sent to the background at 0 s.\n\n"
        let header = ["policy", "strategy", "kept running", "first stop", "final state", "why"]
        var rows = [header]
        for r in results {
            rows.append([
                r.policy, r.strategy.rawValue, "\(grouped(Int(r.ran.rounded()))) s",
                r.firstStop.map { "\(grouped(Int($0.rounded()))) s" } ?? "-", r.finalState.rawValue, why(r),
            ])
        }
        let widths = (0..<header.count - 1).map { c in rows.map { $0[c].count }.max()! }
        for row in rows {
            var line = ""
            for c in 0..<row.count - 1 {
                let cell = row[c]
                let pad = String(repeating: " ", count: widths[c] - cell.count)
                line += (c == 2 || c == 3) ? pad + cell : cell + pad
                line += "  "
            }
            out += line + row.last! + "\n"
        }
        return out
    }

    /// One sentence: how long it ran and why it stopped.
    static func why(_ r: SimulationResult) -> String {
        guard let firstStop = r.firstStop, let firstStopReason = r.firstStopReason else {
            switch r.strategy {
            case .location, .locationPulse:
                return "ran throughout: \(grouped(r.refreshes)) locations refreshed the budget"
            case .audio: return "ran throughout: playback keeps the app running"
            default: return "ran throughout"
            }
        }
        if r.wakes > 0 {
            let perWake = Int(((r.ran - firstStop) / Double(r.wakes)).rounded())
            let by = r.strategy == .visits ? "arrivals and departures" : "significant changes"
            return "suspended between moves: woken \(grouped(r.wakes)) times by \(by), ~\(perWake) s each"
        }
        return "\(firstStopReason)"
    }
}
