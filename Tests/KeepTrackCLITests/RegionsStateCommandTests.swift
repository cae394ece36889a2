import Foundation
import KeepTrackTesting
import Testing

@Suite("keeptrack regions state", .offThePool)
struct RegionsStateCommandTests {
    @Test func answersAStoredRegionsStateByID() throws {
        let dir = try TemporaryDirectory("kt-data").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let imported = try keeptrack(["regions", "import", "fixtures/walk-15min.regions.geojson", "--data-dir", dir])
        #expect(imported.status == 0)
        // Nothing tracked yet: unknown, as CoreLocation before its first fix.
        let before = try keeptrack(["regions", "state", "marienplatz", "--data-dir", dir])
        #expect(before.status == 0)
        #expect(before.stdout == #"{"region":"marienplatz","state":"unknown"}"# + "\n")
        // What a tracker saved: the listed regions are inside, the others outside.
        try Data(#"{"inside":[{"dwellReported":false,"enteredAt":1715679000,"id":"marienplatz"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: dir + "/region-states.json"))
        let inside = try keeptrack(["regions", "state", "marienplatz", "--data-dir", dir])
        #expect(inside.stdout == #"{"region":"marienplatz","state":"inside"}"# + "\n")
        let outside = try keeptrack(["regions", "state", "hofgarten", "--data-dir", dir])
        #expect(outside.stdout == #"{"region":"hofgarten","state":"outside"}"# + "\n")
        let missing = try keeptrack(["regions", "state", "nowhere", "--data-dir", dir])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("no monitored region with id nowhere"))
        // The usage is the refusing command's, not the root's `keeptrack <subcommand>`.
        #expect(
            missing.stderr.contains(
                "\nUsage: keeptrack regions state <id>") && missing.stderr.contains("'keeptrack regions state --help'"),
            "\(missing.stderr)")
    }

    @Test func importKeepsTheFileOrderAndReplacesByID() throws {
        let dir = try TemporaryDirectory("kt-data").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try keeptrack(["regions", "import", "fixtures/walk-15min.regions.geojson", "--data-dir", dir])
        let again = try keeptrack(["regions", "import", "fixtures/walk-15min.regions.geojson", "--data-dir", dir])
        #expect(again.stdout.contains("imported 3 regions (0 new); 3 monitored"))
        let list = try keeptrack(["regions", "list", "--data-dir", dir])
        #expect(list.stdout.split(separator: "\n").count == 3)
    }
}
