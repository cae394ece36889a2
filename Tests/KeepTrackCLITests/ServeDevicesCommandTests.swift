import Foundation
import KeepTrackTesting
import Testing

/// `keeptrack serve devices add|list|revoke` and the fleet options, as a user runs them.
@Suite("keeptrack serve devices", .offThePool)
struct ServeDevicesCommandTests {
    @Test func addsListsAndRevokesDeviceTokensInTheDatabaseOfDb() throws {
        let dir = try TemporaryDirectory("kt-devices").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/endpoint.sqlite"
        let added = try keeptrack(["serve", "devices", "add", "van1", "--db", db])
        #expect(added.status == 0, "\(added.stderr)")
        let token = added.stdout.trimmingCharacters(in: .newlines)
        #expect(token.count == 43 && !token.contains(" "))
        let again = try keeptrack(["serve", "devices", "add", "van1", "--db", db])
        #expect(again.status != 0 && again.stderr.contains("device 'van1' has a token already; revoke it first"))
        #expect(try keeptrack(["serve", "devices", "add", "van2", "--db", db]).stderr.isEmpty)
        // An OwnTracks USER/DEVICE with capitals: its posts arrive lowercased, which it says.
        let capitals = try keeptrack(["serve", "devices", "add", "Bob/Tablet", "--db", db])
        #expect(capitals.status == 0)
        #expect(capitals.stderr.hasPrefix("warning: OwnTracks posts arrive as bob/tablet"), "\(capitals.stderr)")
        #expect(try keeptrack(["serve", "devices", "revoke", "Bob/Tablet", "--db", db]).status == 0)
        let list = try keeptrack(["serve", "devices", "list", "--db", db])
        #expect(list.stdout.split(separator: "\n").map { $0.split(separator: "\t")[0] } == ["van1", "van2"])
        #expect(!list.stdout.contains(token))
        #expect(try keeptrack(["serve", "devices", "revoke", "van1", "--db", db]).stdout == "revoked van1\n")
        let gone = try keeptrack(["serve", "devices", "revoke", "van1", "--db", db])
        #expect(gone.status != 0 && gone.stderr.contains("device 'van1' has no token"))
        // A device revoked shares nothing more: its link is revoked with it, and said.
        #expect(try keeptrack(["serve", "share", "add", "van2", "--expires", "2h", "--db", db]).status == 0)
        // A negative duration is its value, refused as such (not "Missing value").
        let negative = try keeptrack(["serve", "share", "add", "van2", "--expires", "-5m", "--db", db])
        #expect(negative.status == 64 && negative.stderr.hasPrefix("Error: --expires: '-5m' is neither"))
        let shared = try keeptrack(["serve", "devices", "revoke", "van2", "--db", db])
        #expect(shared.stdout == "revoked van2 and 1 share link of it\n", "\(shared.stderr)")
        let listed = try keeptrack(["serve", "share", "list", "--db", db]).stdout
        #expect(listed.hasSuffix("\tvan2\t" + listed.split(separator: "\t")[2] + "\trevoked\t-\t-\n"), "\(listed)")
        // Removing it again says it was revoked already, and when.
        let id = String(listed.split(separator: "\t")[0])
        let removedAgain = try keeptrack(["serve", "share", "remove", id, "--db", db])
        #expect(removedAgain.stdout.hasPrefix("\(id) was revoked already, at "), "\(removedAgain.stdout)")
        // The verbs are subcommands: argument-parser names the one it does not know.
        let wrong = try keeptrack(["serve", "devices", "rename", "--db", db])
        #expect(wrong.status == 64 && wrong.stderr.contains("'rename'"), "\(wrong.stderr)")
        let noID = try keeptrack(["serve", "devices", "add", "--db", db])
        #expect(noID.status == 64 && noID.stderr.contains("Missing expected argument '<id>'"), "\(noID.stderr)")
        let missing = try keeptrack(["serve", "devices", "list", "--db", dir + "/none.sqlite"])
        #expect(missing.status != 0 && missing.stderr.contains("no endpoint database at \(dir)/none.sqlite\n"))
    }

    /// A device's own overspeed limit: set in km/h, listed, removed with `--global`; a limit that
    /// is not a speed, or removing one the device does not have, is refused.
    @Test func setsListsAndRemovesADevicesOwnOverspeedLimit() throws {
        let dir = try TemporaryDirectory("kt-overspeed").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/endpoint.sqlite"
        let set = try keeptrack(["serve", "devices", "overspeed", "van1", "90", "--db", db])
        #expect(set.status == 0 && set.stdout == "van1: overspeed above 90 km/h\n", "\(set.stderr)")
        #expect(try keeptrack(["serve", "devices", "overspeed", "van2", "52.5", "--db", db]).status == 0)
        #expect(try keeptrack(["serve", "devices", "overspeed", "--db", db]).stdout == "van1\t90\nvan2\t52.5\n")
        let removed = try keeptrack(["serve", "devices", "overspeed", "van1", "--global", "--db", db])
        #expect(removed.stdout == "van1: serve's --overspeed applies\n", "\(removed.stderr)")
        let again = try keeptrack(["serve", "devices", "overspeed", "van1", "--global", "--db", db])
        #expect(again.status != 0 && again.stderr.contains("device 'van1' has no overspeed limit of its own"))
        let zero = try keeptrack(["serve", "devices", "overspeed", "van1", "0", "--db", db])
        #expect(zero.status == 64 && zero.stderr.contains("the limit is a speed in km/h above 0"), "\(zero.stderr)")
        let none = try keeptrack(["serve", "devices", "overspeed", "van1", "--db", db])
        #expect(none.status == 64 && none.stderr.contains("give the device's limit in km/h, or --global"))
        #expect(try keeptrack(["serve", "devices", "overspeed", "--db", db]).stdout == "van2\t52.5\n")
    }

    /// The warning comes first, before the database is opened (here it can't be, and serve stops).
    @Test(
        arguments: [("0.0.0.0", nil, true), ("::", nil, true), ("127.0.0.1", nil, false), ("0.0.0.0", "s3cret", false)]
            as [(String, String?, Bool)])
    func warnsWhenServingBeyondLoopbackWithoutAToken(host: String, token: String?, warns: Bool) throws {
        let r = try keeptrack(
            ["serve", "--host", host, "--port", "0", "--db", "/nonexistent/dir/endpoint.sqlite"]
                + (token.map { ["--token", $0] } ?? []))
        #expect(r.status != 0, "\(r.stderr)")
        #expect(r.stderr.contains("warning: serving on \(host) without --token") == warns, "\(r.stderr)")
    }

    /// A token beginning with `-` (base64url has the character; 1 token in 64 made before new ones
    /// avoided it) is the option's value, for serve and for an upload, not a missing one.
    @Test func aTokenBeginningWithADashIsTheTokensValue() throws {
        let serve = try keeptrack(
            ["serve", "--host", "0.0.0.0", "--port", "0", "--token", "-Gq3n", "--db", "/nonexistent/dir/e.sqlite"])
        #expect(serve.stderr.hasPrefix("Error: cannot open the database /nonexistent/dir/e.sqlite"), "\(serve.stderr)")
        let replay = try keeptrack(
            ["replay", "--upload", "http://127.0.0.1:1/x", "--token", "-Gq3n", "/nonexistent/walk.nmea"])
        #expect(replay.stderr.contains("error: /nonexistent/walk.nmea: cannot open"), "\(replay.stderr)")
    }

    @Test func refusesARetentionShorterThanAnHour() throws {
        let r = try keeptrack(["serve", "--retention", "90", "--port", "0"])
        #expect(r.status != 0 && r.stderr.contains("--retention must be at least 1h"))
    }
}
