import Formats
import Foundation
import KeepTrackTesting
import Testing
import TrackServerTesting
import Upload

/// Any JSON object with `accepted` acknowledges a batch, whatever its whitespace and key order: an
/// endpoint written in Python answers `{"accepted": 4, "duplicates": 0}`.
@Suite("Uploader: acknowledgements as real servers write them")
struct AcknowledgementTests {
    @Test(arguments: [
        (#"{"accepted":3,"duplicates":0}"#, 3), (#"{"accepted": 3, "duplicates": 0}"#, 3),
        (#"{ "duplicates" : 1 ,"accepted" : 2 }"#, 2), ("{\n  \"accepted\": 5\n}\n", 5),
        (#"{"status":"ok","accepted":1,"extra":{"nested":[1,2,{"a":null}]}}"#, 1),
    ])
    func readsAnyValidAcknowledgement(body: String, accepted: Int) {
        #expect(JSONBatch.Reply.decode(Array(body.utf8))?.accepted == accepted)
    }

    @Test(arguments: [
        "<html>Welcome to the hotel WiFi</html>", "", "{}", #"{"accepted":"3"}"#, #"{"accepted":-1}"#,
        #"{"accepted":1.5}"#, #"{"accepted":3} trailing"#, "[]", #"{"accepted":3"#,
    ])
    func refusesWhatIsNotOne(body: String) {
        #expect(JSONBatch.Reply.decode(Array(body.utf8)) == nil)
    }

    /// An answer that counts fewer records than were sent acknowledges none of them (it was taken
    /// as the whole batch's); `duplicates` count as known.
    @Test(arguments: [
        (#"{"accepted":4,"duplicates":0}"#, true), (#"{"accepted":1,"duplicates":3}"#, true),
        (#"{"accepted":5}"#, true), (#"{"accepted":3,"duplicates":0}"#, false), (#"{"accepted":0}"#, false),
    ])
    func anAnswerCountingFewerRecordsThanSentAcknowledgesNone(body: String, acknowledges: Bool) {
        let problem = JSONBatchFormat().problemWithAcknowledgement(Array(body.utf8), of: 4)
        #expect((problem == nil) == acknowledges, "\(problem ?? "acknowledged")")
        if !acknowledges {
            #expect(
                problem?.hasPrefix("an acknowledgement of ") == true && problem!.hasSuffix(" of the 4 records sent"))
        }
    }

    /// A real endpoint that stores all but one record of each batch and says so: nothing leaves the
    /// outbox, and why is said.
    @Test(.offThePool) func anEndpointCountingOneRecordShortKeepsTheBatchInTheOutbox() async throws {
        let script = #"""
            import http.server, json
            class H(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    n = len(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["records"])
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps({"accepted": n - 1, "duplicates": 0}).encode())
                def log_message(self, *a): pass
            s = http.server.HTTPServer(("127.0.0.1", 0), H)
            print(s.server_address[1], flush=True)
            s.serve_forever()
            """#
        let python = try Tool(executable: URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script])
        defer { python.terminate() }
        python.guardAgainstHang(seconds: 120)
        let port = try #require(try await python.line().flatMap { Int($0) })
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        _ = try outbox.append(walk(4))
        var c = Uploader.Configuration(url: "http://127.0.0.1:\(port)/v1/locations")
        c.maxWait = 0
        c.initialBackoff = 0.01
        c.maxBackoff = 0.05
        let uploader = try Uploader(outbox: outbox, configuration: c)
        try await withTimeout(60, "the upload to give up") { await uploader.run(drain: true) }
        let stats = uploader.stats
        #expect(stats.uploaded == 0 && stats.retries > 0)
        #expect(stats.lastError?.contains("with an acknowledgement of 3 of the 4 records sent") == true, "\(stats)")
        #expect(try outbox.stats().pending == 4)
        await uploader.shutdown()
    }

    /// Off the pool: the server is a real process with a wall-clock hang guard, and the test must
    /// not wait for a pool thread (behind every synchronous test queued) while the guard runs.
    @Test(.offThePool) func aPythonEndpointAnsweringWithJSONDumpsDefaultsIsAcknowledged() async throws {
        // Python's http.server; json.dumps writes ", " and ": " by default, keys in insertion order.
        let script = #"""
            import http.server, json, sys
            class H(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    n = len(body["records"])
                    answer = json.dumps({"duplicates": 0, "accepted": n} if n % 2 else {"accepted": n, "duplicates": 0})
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(answer.encode())
                def log_message(self, *a): pass
            s = http.server.HTTPServer(("127.0.0.1", 0), H)
            print(s.server_address[1], flush=True)
            s.serve_forever()
            """#
        let python = try Tool(executable: URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script])
        defer { python.terminate() }
        python.guardAgainstHang(seconds: 120)
        let port = try #require(try await python.line().flatMap { Int($0) })
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let outbox = try Outbox(path: dir + "/outbox.sqlite")
        _ = try outbox.append(walk(11))
        var c = Uploader.Configuration(url: "http://127.0.0.1:\(port)/v1/locations")
        c.maxBatchCount = 4
        c.maxWait = 0
        c.initialBackoff = 0.01
        c.maxBackoff = 0.05
        let uploader = try Uploader(outbox: outbox, configuration: c)
        try await withTimeout(60, "the upload to drain") { await uploader.run(drain: true) }
        let stats = uploader.stats
        #expect(stats.uploaded == 11, "last error: \(stats.lastError ?? "none")")
        #expect(stats.retries == 0, "last error: \(stats.lastError ?? "none")")
        #expect(try outbox.stats().pending == 0)
        await uploader.shutdown()
    }
}
