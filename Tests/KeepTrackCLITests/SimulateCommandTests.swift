import Foundation
import KeepTrackTesting
import Testing

@Suite("keeptrack simulate", .offThePool)
struct SimulateCommandTests {
    /// The field table (docs/background.md, "keeptrack simulate"): the defaults must reproduce it exactly.
    @Test func defaultsReproduceTheFieldTable() throws {
        let r = try keeptrack(["simulate"])
        #expect(r.status == 0)
        let golden = try String(
            contentsOf: packageRoot.appendingPathComponent("Tests/KeepTrackCLITests/Golden/simulate.txt"),
            encoding: .utf8)
        #expect(r.stdout == golden)
    }

    /// The same facts, read from the JSON rows rather than the text.
    @Test func theTableSaysWhatTheFieldReports() throws {
        let r = try keeptrack(["simulate", "--json"])
        #expect(r.status == 0)
        var rows: [String: [String: Any]] = [:]
        for line in r.stdout.split(separator: "\n") {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            rows["\(o["policy"]!)/\(o["strategy"]!)"] = o
        }
        #expect(rows.count == 27)
        for policy in ["ios6", "ios7", "ios13"] {
            let budget = ["ios6": 600, "ios7": 180, "ios13": 30][policy]!
            // None: suspended within seconds.
            #expect(rows["\(policy)/none"]?["ran"] as? Int == 5)
            // A task, restarted or not: the budget, never more (ios6/ios7: never past 10 minutes).
            #expect(rows["\(policy)/task"]?["ran"] as? Int == budget)
            #expect(rows["\(policy)/task-restart"]?["ran"] as? Int == budget)
            #expect((rows["\(policy)/task-restart"]?["ran"] as? Int ?? .max) <= 600)
            // An unended task: terminated.
            #expect(rows["\(policy)/unended-task"]?["finalState"] as? String == "terminated")
            // Location mode and audio: the whole hour.
            #expect(rows["\(policy)/location"]?["ran"] as? Int == 3600)
            #expect(rows["\(policy)/audio"]?["ran"] as? Int == 3600)
            // Significant change: suspended between moves, woken at each.
            let sc = try #require(rows["\(policy)/significant-change"])
            #expect(sc["finalState"] as? String == "suspended")
            #expect((sc["wakes"] as? Int ?? 0) >= 4)
            // Visits alone: suspended too, woken at each arrival and departure (4 of each in the hour).
            let visits = try #require(rows["\(policy)/visits"])
            #expect(visits["finalState"] as? String == "suspended")
            #expect(visits["wakes"] as? Int == 8)
        }
        // The pulse works while 60 s is within the budget; iOS 13's 30 s is not.
        #expect(rows["ios7/location-pulse"]?["ran"] as? Int == 3600)
        #expect(rows["ios13/location-pulse"]?["ran"] as? Int == 30)
    }

    @Test func aCustomPolicyComesFromOverrides() throws {
        let r = try keeptrack(["simulate", "--budget", "60", "--grace", "2", "--strategy", "task-restart", "--json"])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.contains(#""policy":"custom","strategy":"task-restart","ran":57"#) == true)
    }

    @Test func aFixtureGivesTheMotion() throws {
        let r = try keeptrack([
            "simulate", "--fixture", "fixtures/walk-15min.nmea", "--policy", "ios7",
            "--strategy", "location",
        ])
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("900 s of fixtures/walk-15min.nmea"))
        #expect(r.stdout.contains("ios7    location"))
    }

    @Test(arguments: [
        (["simulate", "--strategy", "pray"], "--strategy must be all or one of none, task,"),
        (["simulate", "--policy", "ios5"], "--policy must be ios6, ios7 or ios13 or all, got 'ios5'."),
        (["simulate", "--budget", "10", "--warning-lead", "20"], "Custom policy: the warning lead must be"),
        (["simulate", "--fixture", "missing.nmea"], "--fixture: "),
    ])
    func badOptionsAreNamed(arguments: [String], message: String) throws {
        let r = try keeptrack(arguments)
        #expect(r.status == 64)
        #expect(r.stderr.contains(message))
    }
}
