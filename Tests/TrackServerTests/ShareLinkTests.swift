import Formats
import Foundation
import Geo
import NIOHTTP1
import NIOWebSocket
import KeepTrackTesting
import Testing
import TrackServer
import TrackServerTesting
import TrackStore

/// Issue 38, item 4: share links. A link shows one device, read-only, within its window, until it
/// expires or is revoked (410); its token is 128 random bits kept as a digest, and its requests are
/// rate limited (429).
@Suite("Endpoint: share links", .serialized)
struct ShareLinkTests {
    static let t0 = 1_800_000_000.0

    static func object(_ body: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
    }

    /// Two devices with a walk each; a share of `van`.
    static func start(_ kind: StoreKind, clock: ManualClock, perMinute: Int = 600) async throws -> (Endpoint, Raw) {
        let endpoint = try await Endpoint.start(store: kind, clock: clock) { $0.shares.perMinute = perMinute }
        for device in ["van", "car"] {
            let records = walk(120, from: t0 - 3600, device: device)
            _ = try await endpoint.server.store.insert(records, format: "osmand", received: t0 - 3600)
        }
        return (endpoint, Raw(endpoint: endpoint))
    }

    static func share(_ raw: Raw, _ body: String, token: String? = "secret") async throws -> (
        status: Int, json: [String: Any]
    ) {
        let (status, text) = try await raw.send(.POST, "/v1/shares", body: body, token: token)
        return (status, (try? object(text)) ?? ["body": text])
    }

    /// An id or token a user types after a command (`share remove ID`, `--token TOKEN`) never
    /// begins with `-`, which argument-parser reads as an option: 1 in 64 did (a CI run revoked a
    /// share `-xPRS7OnoxA` and `share remove` could not name it). The first characters still take
    /// the 63 others.
    @Test func idsAndTokensNeverBeginWithADash() {
        var firsts: [Character: Int] = [:]
        for _ in 0..<20_000 {
            for text in [ShareTokens.newID(), ShareTokens.newToken(), DeviceTokens.newToken()] {
                firsts[text.first!, default: 0] += 1
            }
        }
        #expect(firsts["-"] == nil)
        #expect(firsts.count == 63, "\(firsts.keys.sorted())")
    }

    @Test(arguments: StoreKind.allCases) func aShareShowsOneDeviceReadOnlyUntilItExpires(kind: StoreKind) async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(kind, clock: clock)
        do {
            let (status, made) = try await Self.share(raw, #"{"device":"van","expires":"2h"}"#)
            #expect(status == 201, "\(made)")
            let token = try #require(made["token"] as? String)
            #expect(token.count == 22 && ShareTokens.isWellFormed(token))
            #expect(made["url"] as? String == "/s/\(token)")
            #expect(made["state"] as? String == "active")
            #expect(made["expires"] as? String == ISOTime.string(Self.t0 + 7200))
            // The page, without any credential.
            let page = try await raw.send(.GET, "/s/\(token)", token: nil)
            #expect(page.status == 200 && page.body.contains("<html"))
            // Its device's reads.
            for path in ["trail", "stops", "trips", "stats"] {
                let r = try await raw.send(.GET, "/v1/devices/van/\(path)?share=\(token)", token: nil)
                #expect(r.status == 200, "\(path): \(r.body)")
            }
            let latest = try Self.object(try await raw.send(.GET, "/v1/devices/latest?share=\(token)", token: nil).body)
            #expect((latest["devices"] as? [[String: Any]])?.map { $0["id"] as? String } == ["van"])
            // No other device, no other route, no write, whatever else the request carries.
            for (method, path, body) in [
                (HTTPMethod.GET, "/v1/devices/car/trail", nil), (.GET, "/v1/devices/car/stats", nil),
                (.GET, "/v1/devices", nil), (.GET, "/v1/positions?bbox=0,0,1,1", nil),
                (.POST, "/v1/locations", #"{"device":"van","records":[]}"#),
                (.POST, "/v1/shares", #"{"device":"van","expires":"1h"}"#), (.DELETE, "/v1/shares/x", nil),
                (.GET, "/api/0/list", nil),
            ] as [(HTTPMethod, String, String?)] {
                let r = try await raw.send(
                    method, path + (path.contains("?") ? "&" : "?") + "share=\(token)", body: body)
                #expect(r.status == 403, "\(method) \(path): \(r.status) \(r.body)")
            }
            // The list shows it, without its token.
            let list = try await raw.send(.GET, "/v1/shares")
            #expect(list.status == 200 && list.body.contains(made["id"] as! String) && !list.body.contains(token))
            // Expired: 410 everywhere, with the error body.
            clock.advance(by: .seconds(7200))
            let gone = try await raw.send(.GET, "/v1/devices/van/trail?share=\(token)", token: nil)
            #expect(gone.status == 410 && gone.body.contains("\"error\"") && gone.body.contains("expired"))
            #expect(try await raw.send(.GET, "/s/\(token)", token: nil).status == 410)
            // A browser is shown a page that says so, with the same status; an unknown link too.
            let html = [("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")]
            let shown = try await raw.send(.GET, "/s/\(token)", headers: html, token: nil)
            #expect(shown.status == 410 && shown.body.hasPrefix("<!DOCTYPE html>"), "\(shown.body.prefix(200))")
            #expect(shown.body.contains("This share link has ended") && shown.body.contains("expired at"))
            #expect(!shown.body.contains("\"error\"") && !shown.body.contains("<!--"))
            let unknown = try await raw.send(.GET, "/s/nope<b>", headers: html, token: nil)
            #expect(unknown.status == 404 && unknown.body.contains("No such share link"))
            let listed = try Self.object(try await raw.send(.GET, "/v1/shares").body)
            #expect((listed["shares"] as? [[String: Any]])?.first?["state"] as? String == "expired")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    @Test func aRevokedShareIsGoneAtOnceAndItsWindowClipsWhatItShows() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(.sqlite, clock: clock)
        do {
            let from = Self.t0 - 3600 + 30, to = Self.t0 - 3600 + 60
            let (_, made) = try await Self.share(
                raw, #"{"device":"van","expires":"1d","from":"\#(Int(from))","to":"\#(ISOTime.string(to))"}"#)
            let token = try #require(made["token"] as? String), id = try #require(made["id"] as? String)
            let trail = try Self.object(
                try await raw.send(.GET, "/v1/devices/van/trail?format=json&share=\(token)", token: nil).body)
            let times = (trail["records"] as? [[String: Any]] ?? []).compactMap {
                ISOTime.parse($0["time"] as? String ?? "")
            }
            #expect(!times.isEmpty && times.allSatisfy { $0 >= from && $0 <= to }, "\(times)")
            // A wider query is clipped too.
            let wide = try Self.object(
                try await raw.send(
                    .GET, "/v1/devices/van/trail?format=json&from=0&to=9999999999&share=\(token)", token: nil
                ).body)
            #expect((wide["records"] as? [Any])?.count == times.count)
            // Asked backwards, it is a 400 naming what was sent, as on every route that takes a range; the
            // window clipping a sound range to nothing is an empty answer.
            for path in ["trail", "stops", "trips", "stats"] {
                let backwards = try await raw.send(
                    .GET, "/v1/devices/van/\(path)?from=2000&to=1000&share=\(token)", token: nil)
                #expect(backwards.status == 400 && backwards.body.contains("from: 2000 is after to: 1000"), "\(path)")
                let outside = try await raw.send(
                    .GET, "/v1/devices/van/\(path)?from=1000&to=2000&share=\(token)", token: nil)
                #expect(outside.status == 200, "\(path): \(outside.body)")
            }
            // The share reads itself, and nothing else, at /v1/shares: its page learns its device and
            // window there (an admin's token beside it changes nothing).
            let itself = try Self.object(try await raw.send(.GET, "/v1/shares?share=\(token)").body)
            let shares = try #require(itself["shares"] as? [[String: Any]])
            #expect(
                shares.count == 1 && shares.first?["id"] as? String == id && shares.first?["device"] as? String == "van"
            )
            #expect(
                shares.first?["from"] as? String == ISOTime.string(from)
                    && shares.first?["to"] as? String == ISOTime.string(to))
            #expect(!(shares.first?.keys.contains("token") ?? true))
            let removed = try await raw.send(.DELETE, "/v1/shares/\(id)")
            #expect(removed.status == 200 && removed.body.contains("\"state\":\"revoked\""))
            let gone = try await raw.send(.GET, "/v1/devices/van/trail?share=\(token)", token: nil)
            #expect(gone.status == 410 && gone.body.contains("revoked"))
            #expect(try await raw.send(.DELETE, "/v1/shares/nope").status == 404)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    @Test func aDeviceTokenSharesItsOwnDeviceOnly() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(.sqlite, clock: clock)
        do {
            let van = try await endpoint.server.store.addCredential(device: "van", now: Self.t0)
            #expect(try await Self.share(raw, #"{"device":"van","expires":"1h"}"#, token: van).status == 201)
            #expect(try await Self.share(raw, #"{"device":"car","expires":"1h"}"#, token: van).status == 403)
            _ = try await Self.share(raw, #"{"device":"car","expires":"1h"}"#)
            let own = try Self.object(try await raw.send(.GET, "/v1/shares", token: van).body)
            #expect((own["shares"] as? [[String: Any]])?.map { $0["device"] as? String } == ["van"])
            let all = try Self.object(try await raw.send(.GET, "/v1/shares").body)
            let carID = try #require(
                (all["shares"] as? [[String: Any]])?.first { $0["device"] as? String == "car" }?["id"])
            #expect(try await raw.send(.DELETE, "/v1/shares/\(carID)", token: van).status == 404)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Revoking a device's token revokes its share links still active, whoever made them (a lost
    /// phone's, a leaked token's): 410 at once. Its expired links stay expired; another device's
    /// work.
    @Test(arguments: StoreKind.allCases) func revokingADeviceRevokesItsShareLinks(kind: StoreKind) async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(kind, clock: clock)
        do {
            let store = endpoint.server.store
            let van = try await store.addCredential(device: "van", now: Self.t0)
            let short = try #require(try await Self.share(raw, #"{"device":"van","expires":"1m"}"#).json["token"])
            clock.advance(by: .seconds(120))
            var tokens: [String] = []
            for (body, token) in [
                (#"{"device":"van","expires":"1h"}"#, van), (#"{"device":"van","expires":"2h"}"#, "secret"),
                (#"{"device":"car","expires":"1h"}"#, "secret"),
            ] {
                tokens.append(try #require(try await Self.share(raw, body, token: token).json["token"] as? String))
            }
            let at = Self.t0 + 120
            #expect(try await store.revokeCredential(device: "van", at: at) == 2)
            #expect(try await store.revokeCredential(device: "van", at: at) == nil)
            for token in tokens.prefix(2) {
                let gone = try await raw.send(.GET, "/v1/devices/van/trail?share=\(token)", token: nil)
                #expect(gone.status == 410 && gone.body.contains("revoked"), "\(gone.body)")
            }
            #expect(try await raw.send(.GET, "/s/\(tokens[2])", token: nil).status == 200)
            let states = try Self.object(try await raw.send(.GET, "/v1/shares").body)["shares"] as? [[String: Any]]
            #expect(
                states?.map { "\($0["device"] ?? "")=\($0["state"] ?? "")" }.sorted()
                    == ["car=active", "van=expired", "van=revoked", "van=revoked"], "\(short)")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// A share's live stream shows its device only, and is closed when the share expires; a forged
    /// token's stream is refused.
    ///
    /// The streams are read on raw sockets, frame by frame (see `Endpoint.openStream`).
    @Test func aSharesStreamShowsItsDeviceAndClosesAtItsExpiry() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(.sqlite, clock: clock)
        do {
            let (_, made) = try await Self.share(raw, #"{"device":"van","expires":"1h"}"#)
            let token = try #require(made["token"] as? String)
            let socket = try endpoint.openStream("?share=\(token)")
            defer { socket.close() }
            let opened = try await socket.frames { !$0.isEmpty }.frames
            let snapshot = try #require(opened.first).text
            #expect(snapshot.contains(#""id":"van""#) && !snapshot.contains(#""id":"car""#), "\(snapshot)")
            clock.advance(by: .seconds(3600))
            let (frames, eof) = try await socket.frames(upgraded: true)
            let close = try #require(frames.last, "no frame before the end")
            #expect(close.opcode == 0x8 && Array(close.payload.prefix(2)) == [0x03, 0xF0], "\(frames)")
            #expect(String(decoding: close.payload.dropFirst(2), as: UTF8.self).contains("gone"))
            #expect(eof, "the connection stays open")
            let (code, reason) = try await endpoint.streamRefusal("?share=\(String(repeating: "A", count: 22))")
            #expect(code == 1008 && reason.contains("unauthorized"), "\(reason)")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// A share's stream shows the records of its window only: a backlog uploaded while it is open
    /// (a point from before the window, then one in it) shows the second alone.
    @Test func aSharesStreamLeavesOutRecordsOutsideItsWindow() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(.sqlite, clock: clock)
        do {
            let window = #""from":"\#(ISOTime.string(Self.t0 - 600))","to":"\#(ISOTime.string(Self.t0 + 3600))""#
            let (status, made) = try await Self.share(raw, #"{"device":"van","expires":"2h",\#(window)}"#)
            #expect(status == 201, "\(made)")
            let token = try #require(made["token"] as? String)
            let socket = try endpoint.openStream("?share=\(token)")
            defer { socket.close() }
            _ = try await socket.frames { !$0.isEmpty }
            for (seq, time) in [(1000, Self.t0 - 1800), (1001, Self.t0 - 10)] {
                let batch =
                    #"{"device":"van","records":[{"seq":\#(seq),"kind":"location","time":"\#(ISOTime.string(time))","#
                    + #""lat":48.1,"lon":11.5}]}"#
                let sent = try await raw.send(.POST, "/v1/locations", body: batch)
                try #require(sent.status == 200, "\(sent.body)")
            }
            let (frames, _) = try await socket.frames(upgraded: true) { frames in
                frames.contains { $0.text.contains(#""seq":1001"#) }
            }
            let records = frames.map(\.text).filter { $0.contains(#""type":"record""#) }
            #expect(records.count == 1 && records[0].contains(#""seq":1001"#), "\(records)")
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }

    /// Hostile inputs get a clear 4xx; a forged token gets nothing; the token is stored only as its
    /// digest; the rate is bounded.
    @Test func hostileInputsForgedTokensAndFloodsAreRefused() async throws {
        let clock = ManualClock(now: EpochInstant(secondsSince1970: Self.t0))
        let (endpoint, raw) = try await Self.start(.sqlite, clock: clock, perMinute: 5)
        do {
            for (body, words) in [
                (#"{"device":"van","expires":"99999999999999d"}"#, "366 days"),
                (#"{"device":"van","expires":"forever"}"#, "neither a duration"),
                (#"{"device":"van","expires":"400d"}"#, "366 days"),
                (#"{"device":"van","expires":"1990-01-01T00:00:00Z"}"#, "not in the future"),
                (#"{"device":"van","expires":"1h","from":"../../etc/passwd"}"#, "from:"),
                (#"{"device":"van","expires":"1h","from":"99999999999999"}"#, "1970 to 9999"),
                (#"{"device":"van","expires":"1h","from":"2000","to":"1000"}"#, "to:"),
                (#"{"device":"van"}"#, "expires:"), (#"[1]"#, "JSON object"), ("not json", "not JSON"),
                (#"{"device":"van","expires":-5}"#, "neither a duration"),
                (#"{"device":"van","expires":true}"#, "expires:"),
            ] {
                let (status, answer) = try await Self.share(raw, body)
                let message = ((answer["error"] as? [String: Any])?["message"] as? String) ?? "\(answer)"
                #expect(status == 400 && message.contains(words), "\(body): \(status) \(message)")
            }
            #expect(try await Self.share(raw, #"{"device":"nobody","expires":"1h"}"#).status == 404)
            // A device with a token that has sent nothing yet (a phone just set up) can be shared.
            _ = try await endpoint.server.store.addCredential(device: "new-phone", now: Self.t0)
            #expect(try await Self.share(raw, #"{"device":"new-phone","expires":"1h"}"#).status == 201)
            // A number is seconds, as the command line's `--expires 90` is.
            let (seconds, inSeconds) = try await Self.share(raw, #"{"device":"van","expires":7200}"#)
            #expect(seconds == 201 && inSeconds["expires"] as? String == ISOTime.string(Self.t0 + 7200), "\(inSeconds)")
            let forged = String(repeating: "A", count: 22)
            #expect(try await raw.send(.GET, "/v1/devices/van/trail?share=\(forged)", token: nil).status == 401)
            #expect(try await raw.send(.GET, "/v1/devices/van/trail?share=..%2F..%2F", token: nil).status == 401)
            #expect(try await raw.send(.GET, "/s/\(forged)", token: nil).status == 404)
            #expect(try await raw.send(.GET, "/s/..%2F..%2Fetc%2Fpasswd", token: nil).status == 404)
            let (_, made) = try await Self.share(raw, #"{"device":"van","expires":"1h"}"#)
            let token = try #require(made["token"] as? String)
            let file = try Data(contentsOf: URL(fileURLWithPath: endpoint.database))
            let wal = (try? Data(contentsOf: URL(fileURLWithPath: endpoint.database + "-wal"))) ?? Data()
            #expect(file.range(of: Data(token.utf8)) == nil && wal.range(of: Data(token.utf8)) == nil)
            #expect(
                wal.range(of: Data(DeviceTokens.digest(token: token).utf8)) != nil
                    || file.range(of: Data(DeviceTokens.digest(token: token).utf8)) != nil)
            // Five a minute: the sixth waits, and says how long.
            var statuses: [Int] = []
            for _ in 0..<6 {
                statuses.append(try await raw.send(.GET, "/v1/devices/van/stats?share=\(token)", token: nil).status)
            }
            #expect(statuses == [200, 200, 200, 200, 200, 429], "\(statuses)")
            clock.advance(by: .seconds(12))
            #expect(try await raw.send(.GET, "/v1/devices/van/stats?share=\(token)", token: nil).status == 200)
        } catch {
            Issue.record(error)
        }
        await raw.close()
        await endpoint.stop()
    }
}
