import Foundation
import KeepTrackTesting
import Testing

/// `keeptrack serve geofences ...` and `keeptrack serve hooks ...` on serve's `--db`, as an admin
/// runs them (docs/events.md, "Using it"), against a real receiver (`tools/webhook-receiver.py`).
@Suite("keeptrack serve geofences and hooks", .offThePool)
struct ServeEventsCommandTests {
    static let secret = "a secret of at least 16 bytes"

    @Test func geofencesAreAddedListedAndRemovedAndABadDocumentStoresNothing() throws {
        let dir = try TemporaryDirectory("kt-geofences").path
        let db = ["--db", dir + "/endpoint.sqlite"]
        let places = fixturePath("walk-15min.regions.geojson")
        let added = try keeptrack(["serve", "geofences", "add", places] + db)
        #expect(added.status == 0 && added.stdout == "3 added, 0 replaced\n", "\(added.stderr)")
        let again = try keeptrack(["serve", "geofences", "add", places] + db)
        #expect(again.stdout == "0 added, 3 replaced\n", "\(again.stderr)")
        let list = try keeptrack(["serve", "geofences", "list"] + db)
        #expect(list.stdout == "hofgarten\t*\nmarienplatz\t*\nodeonsplatz\t*\n", "\(list.stderr)")
        // A good geofence beside a polygon that crosses itself: the error names the file, the
        // feature and the edges, and neither is stored.
        let bad = dir + "/bad.geojson"
        try Data(
            """
            {"type":"FeatureCollection","features":[
             {"type":"Feature","id":"kiosk","geometry":{"type":"Point","coordinates":[11.5,48.1]},"properties":{"radius":50}},
             {"type":"Feature","id":"bow","geometry":{"type":"Polygon","coordinates":[[[11,48],[11.1,48.1],[11.1,48],[11,48.1],[11,48]]]}}
            ]}
            """.utf8
        ).write(to: URL(fileURLWithPath: bad))
        let refused = try keeptrack(["serve", "geofences", "add", bad] + db)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("bad.geojson: 1 invalid geofence: feature 2 (bow): the polygon intersects itself"))
        #expect(refused.stderr.contains("(nothing stored)"), "\(refused.stderr)")
        #expect(try keeptrack(["serve", "geofences", "list"] + db).stdout == list.stdout)
        #expect(try keeptrack(["serve", "geofences", "remove", "odeonsplatz"] + db).stdout == "removed odeonsplatz\n")
        let gone = try keeptrack(["serve", "geofences", "remove", "odeonsplatz"] + db)
        #expect(gone.status == 1 && gone.stderr.contains("no geofence 'odeonsplatz' in"), "\(gone.stderr)")
        #expect(try keeptrack(["serve", "geofences", "list"] + db).stdout == "hofgarten\t*\nmarienplatz\t*\n")
    }

    /// The docs' sequence with a receiver on this machine: `hooks add` warns that serve needs
    /// `--allow-private-hooks`; `hooks test` without it is refused saying which flag to pass, and
    /// nothing is posted; with it, wherever it is written, the receiver gets a signed `test` event
    /// whose kind header says `test` (never a kind a receiver acts on).
    @Test func aHookToThisMachineIsAddedTestedAndRemoved() throws {
        let dir = try TemporaryDirectory("kt-hooks").path
        let db = ["--db", dir + "/endpoint.sqlite"]
        let secretFile = dir + "/ops.secret"
        // Written with a Windows line end: the CR is no part of the secret.
        try Data("\(Self.secret)\r\n".utf8).write(to: URL(fileURLWithPath: secretFile))
        let receiver = try Tool("tools/webhook-receiver.py", [Self.secret])
        defer { receiver.terminate() }
        receiver.guardAgainstHang(seconds: 120)
        let port = try #require(receiver.readLine().flatMap { Int($0) }, "\(receiver.errors())")
        let url = "http://127.0.0.1:\(port)/hook/ok"

        let added = try keeptrack(
            ["serve", "hooks", "add", "ops", "--url", url, "--secret-file", secretFile, "--kind", "geofenceEnter"] + db)
        #expect(added.status == 0 && added.stdout == "added ops\n", "\(added.stderr)")
        #expect(
            added.stderr.contains(
                "warning: ops: 127.0.0.1 is not a public address (private hooks are not allowed); "
                    + "serve delivers to it only with --allow-private-hooks"), "\(added.stderr)")
        #expect(try keeptrack(["serve", "hooks", "list"] + db).stdout == "ops\twebhook\t\(url)\t0\t0\t-\n")

        let refused = try keeptrack(["serve", "hooks", "test", "ops"] + db)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("not delivered to ops: 127.0.0.1 is not a public address"))
        #expect(refused.stderr.contains("pass --allow-private-hooks to `hooks test`"), "\(refused.stderr)")
        for arguments in [["test", "ops", "--allow-private-hooks"], ["test", "--allow-private-hooks", "ops"]] {
            let tested = try keeptrack(["serve", "hooks"] + arguments + db)
            #expect(tested.status == 0 && tested.stdout == "delivered to ops\n", "\(arguments): \(tested.stderr)")
            let post = try #require(receiver.readLine(), "\(receiver.errors())")
            let seen = try #require(try JSONSerialization.jsonObject(with: Data(post.utf8)) as? [String: Any])
            #expect(seen["valid"] as? Bool == true && seen["status"] as? Int == 200, "\(post)")
            #expect(seen["kind"] as? String == "test", "\(post)")
            #expect(seen["device"] as? String == "keeptrack-test", "\(post)")
        }
        // Two posts in all: the refused test sent none. (Its output ends with the receiver.)
        receiver.stop()
        #expect(receiver.readLine() == nil)

        #expect(try keeptrack(["serve", "hooks", "retry", "ops"] + db).stdout == "0 queued again\n")
        // A kind misspelt: refused, naming the kinds there are; nothing stored.
        let misspelt = try keeptrack(
            ["serve", "hooks", "add", "typo", "--url", url, "--secret-file", secretFile, "--kind", "geofenceEntry"] + db
        )
        #expect(misspelt.status == 1, "\(misspelt.stderr)")
        #expect(
            misspelt.stderr.contains(
                "--kind: 'geofenceEntry' is not an event kind (one of geofenceEnter, geofenceExit,"),
            "\(misspelt.stderr)")

        // A blank name is said as the hook's, not as an option's.
        let blank = try keeptrack(["serve", "hooks", "add", "", "--url", url, "--secret-file", secretFile] + db)
        #expect(blank.stderr == "Error: hook '': the name must have 1 to 128 bytes, has 0\n", "\(blank.stderr)")

        #expect(try keeptrack(["serve", "hooks", "remove", "ops"] + db).stdout == "removed ops\n")
        #expect(try keeptrack(["serve", "hooks", "list"] + db).stdout == "")
        for verb in ["test", "retry"] {
            let gone = try keeptrack(["serve", "hooks", verb, "ops"] + db)
            #expect(gone.status == 1 && gone.stderr.contains("no hook 'ops'"), "\(verb): \(gone.stderr)")
        }
    }
}
