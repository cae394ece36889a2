import Foundation
import KeepTrackTesting
import OwnTracksCrypto
import Testing
import TrackServer
import TrackStore

#if canImport(Glibc)
    import Glibc
#endif

/// `keeptrack serve` (the built binary) on a port it picks over `db`, token `t0ken`, with `options`
/// added (`--faults`): the process and its URL once it listens (the CLI suites that upload to a
/// real endpoint share it).
func serve(_ db: String, _ options: [String] = []) throws -> (Tool, String) {
    let server = try Tool(
        executable: productsDirectory.appendingPathComponent("keeptrack"),
        ["serve", "--port", "0", "--db", db, "--token", "t0ken"] + options)
    server.guardAgainstHang(seconds: 240)
    var seen: [String] = []
    let line = try #require(server.readLine(containing: "\"listening\"", seen: &seen), "\(server.errors())")
    let url = try #require(line.split(separator: "\"").first { $0.hasPrefix("http://") }.map(String.init))
    return (server, url.hasSuffix("/") ? String(url.dropLast()) : url)
}

/// `--secret-file`, `keeptrack serve devices secret` and `--format overland`, as a user runs them:
/// the real binary, uploading to a real `keeptrack serve` (issue 29, items 2 and 3).
@Suite("keeptrack: OwnTracks encryption and Overland", .offThePool)
struct PeersCommandTests {
    @Test func aSecretIsReadFromStandardInputStoredAndRemoved() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/endpoint.sqlite"
        let set = try keeptrack(["serve", "devices", "secret", "Anna/Phone", "--db", db], stdin: Data("s3cr1t\n".utf8))
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stdout == "set the secret of anna/phone in \(db)\n")
        #expect(!set.stdout.contains("s3cr1t") && !set.stderr.contains("s3cr1t"))
        let store = try SQLiteTrackStore(path: db)
        #expect(try await store.secret(device: "anna/phone") == OwnTracksSecret(passphrase: "s3cr1t"))
        #expect(try await store.secretDevices() == ["anna/phone"])
        await store.close()
        let removed = try keeptrack(["serve", "devices", "secret", "anna/phone", "--remove", "--db", db])
        #expect(removed.stdout == "removed the secret of anna/phone\n", "\(removed.stderr)")
        let again = try keeptrack(["serve", "devices", "secret", "anna/phone", "--remove", "--db", db])
        #expect(again.status != 0 && again.stderr.contains("device 'anna/phone' has no secret"))
        let empty = try keeptrack(["serve", "devices", "secret", "anna/phone", "--db", db], stdin: Data())
        #expect(empty.status != 0 && empty.stderr.contains("no secret on standard input"), "\(empty.stderr)")
        let notOwnTracks = try keeptrack(["serve", "devices", "secret", "van1", "--db", db], stdin: Data("x\n".utf8))
        #expect(notOwnTracks.status == 64 && notOwnTracks.stderr.contains("the device is USER/DEVICE"))
    }

    @Test(
        arguments: [
            (
                ["--upload", "http://127.0.0.1:9/owntracks", "--format", "json"], "secret",
                "it goes with --format owntracks"
            ),
            (["--format", "owntracks"], "secret", "--secret-file goes with --upload URL."),
            (["--upload", "http://127.0.0.1:9/owntracks", "--format", "owntracks"], "", "is empty"),
            (["--upload", "http://127.0.0.1:9/owntracks", "--format", "owntracks"], nil, "No such file"),
        ] as [([String], String?, String)])
    func refusesASecretFileThatCannotBeUsed(options: [String], content: String?, message: String) throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/secret"
        if let content { _ = FileManager.default.createFile(atPath: file, contents: Data(content.utf8)) }
        let r = try keeptrack(
            ["replay"] + options + ["--secret-file", file, "--data-dir", dir, "fixtures/walk-15min.nmea"])
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
    }

    /// The number in `upload: N records acknowledged`, or nil.
    func acknowledged(_ stderr: String) -> Int? {
        guard let range = stderr.range(of: " records acknowledged") else { return nil }
        return Int(stderr[..<range.lowerBound].split(separator: " ").last ?? "")
    }

    /// The walk, encrypted with the secret in a file, into `serve` holding the same secret for the
    /// device; another device's upload with another secret: refused, nothing stored, the records kept.
    @Test func replayUploadsEncryptedToServeWhichDecryptsWithTheDevicesSecret() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/endpoint.sqlite"
        for device in ["anna/phone", "anna/tablet"] {
            #expect(
                try keeptrack(
                    ["serve", "devices", "secret", device, "--db", db],
                    stdin: Data("correct horse\n".utf8)
                ).status == 0)
        }
        _ = FileManager.default.createFile(atPath: dir + "/secret", contents: Data("correct horse\n".utf8))
        _ = FileManager.default.createFile(atPath: dir + "/wrong", contents: Data("battery staple".utf8))
        let (server, url) = try serve(db)
        let upload = [
            "--upload", url + "/owntracks", "--format", "owntracks", "--user", "anna", "--token", "t0ken",
            "--max-backoff", "0.01",
        ]
        let r = try keeptrack(
            ["replay"] + upload + [
                "--device-id", "phone", "--secret-file", dir + "/secret",
                "--data-dir", dir + "/a", "fixtures/walk-15min.nmea",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        let sent = try #require(acknowledged(r.stderr), "\(r.stderr)")
        #expect(sent > 800)
        let wrong = try keeptrack(
            ["replay"] + upload + [
                "--device-id", "tablet", "--secret-file", dir + "/wrong",
                "--data-dir", dir + "/b", "fixtures/walk-15min.nmea",
            ])
        #expect(wrong.stderr.contains("does not authenticate"), "\(wrong.stderr)")
        #expect(wrong.stderr.contains("check --token and --secret-file"), "\(wrong.stderr)")
        #expect(acknowledged(wrong.stderr) ?? 0 == 0, "\(wrong.stderr)")
        server.terminate()
        server.drain()
        let store = try SQLiteTrackStore(path: db)
        #expect(try await store.device("anna/phone")?.points == sent)
        #expect(try await store.device("anna/tablet") == nil)
        await store.close()
    }

    /// A user and password in an http(s) URL are HTTP Basic, as an OwnTracks Recorder behind a web
    /// server's password takes them (they were dropped: a 401, and "check the token"); a URL that
    /// can't be used is refused before the run.
    @Test func aPasswordInTheURLIsBasicAuthentication() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let db = dir + "/endpoint.sqlite"
        let added = try keeptrack(["serve", "devices", "add", "anna/phone", "--db", db])
        let token = added.stdout.trimmingCharacters(in: .newlines)
        let (server, url) = try serve(db)
        let r = try keeptrack([
            "replay", "--upload", url.replacingOccurrences(of: "http://", with: "http://anna:\(token)@") + "/owntracks",
            "--format", "owntracks", "--user", "anna", "--device-id", "phone", "--data-dir", dir + "/a",
            "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let sent = try #require(acknowledged(r.stderr), "\(r.stderr)")
        #expect(!r.stderr.contains(token), "the password is said: \(r.stderr)")
        server.terminate()
        server.drain()
        let store = try SQLiteTrackStore(path: db)
        #expect(try await store.device("anna/phone")?.points == sent)
        await store.close()
        for (upload, said) in [
            (["--upload", "http://127.0.0.1:70000/v1/locations"], "port 70000 is not 1 to 65535"),
            (["--upload", "http://a:b@127.0.0.1:9/x", "--token", "t"], "a password in the URL and --token both"),
            (
                ["--upload", "http://127.0.0.1:9/x", "--upload", "https:///x"],
                "--upload https:///x: the URL names no host"
            ),
        ] {
            let refused = try keeptrack(["replay"] + upload + ["--data-dir", dir + "/b", "fixtures/walk-15min.nmea"])
            #expect(refused.status == 64 && refused.stderr.contains(said), "\(refused.stderr)")
        }
        try "upload: http://127.0.0.1:70000/v1/locations\n".write(
            toFile: dir + "/c.yaml", atomically: true, encoding: .utf8)
        let checked = try keeptrack(["config", "check", dir + "/c.yaml"])
        #expect(checked.status != 0 && checked.stderr.contains("port 70000 is not 1 to 65535"), "\(checked.stderr)")
    }

    /// `--format overland` into serve's Dawarich path, the key in the URL as Dawarich takes it; the
    /// same walk again from a new outbox (a token this time) is stored once.
    @Test func replayUploadsOverlandToServesDawarichPath() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (server, url) = try serve(dir + "/endpoint.sqlite")
        let r = try keeptrack([
            "replay", "--upload", url + "/api/v1/overland/batches?api_key=t0ken", "--format", "overland",
            "--device-id", "anna", "--data-dir", dir + "/a", "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let sent = try #require(acknowledged(r.stderr), "\(r.stderr)")
        let again = try keeptrack([
            "replay", "--upload", url + "/api/v1/overland/batches", "--token", "t0ken",
            "--format", "overland", "--device-id", "anna", "--data-dir", dir + "/b",
            "fixtures/walk-15min.nmea",
        ])
        #expect(acknowledged(again.stderr) == sent, "\(again.stderr)")
        server.terminate()
        server.drain()
        let store = try SQLiteTrackStore(path: dir + "/endpoint.sqlite")
        #expect(try await store.device("anna")?.points == sent)
        await store.close()
    }

    /// `--upload embedded` with a secret file: the embedded endpoint is given the device's secret,
    /// so the encrypted walk is decrypted and stored.
    @Test func theEmbeddedEndpointHoldsTheSecretOfTheSecretFile() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = FileManager.default.createFile(atPath: dir + "/secret", contents: Data("correct horse\n".utf8))
        let r = try keeptrack([
            "replay", "--upload", "embedded", "--format", "owntracks", "--secret-file", dir + "/secret",
            "--data-dir", dir, "fixtures/walk-15min.nmea",
        ])
        #expect(r.status == 0, "\(r.stderr)")
        let sent = try #require(acknowledged(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("embedded endpoint: \(sent) points"), "\(r.stderr)")
    }
}
