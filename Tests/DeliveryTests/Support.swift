import AsyncHTTPClient
import Delivery
import EndpointEvents
import Foundation
import Geo
import KeepTrackTesting

/// `tools/webhook-receiver.py`: a real HTTP receiver on 127.0.0.1 that checks each post's signature
/// (in Python, as docs/events.md shows) and processes each event id once; one JSON line per post.
final class Receiver: Sendable {
    struct Post: Decodable, Sendable {
        var path: String
        var id: String
        var kind: String
        var device: String
        var bodyId: String
        var valid: Bool
        var first: Bool
        var status: Int
    }

    let tool: Tool
    let port: Int
    static let secret = "a secret of more than 16 bytes"

    init(seed: Int = 1) async throws {
        let tool = try Tool("tools/webhook-receiver.py", [Self.secret, "--seed", "\(seed)"])
        tool.guardAgainstHang(seconds: 300)
        guard let line = try await offThePool({ tool.readLine() }), let port = Int(line) else {
            throw TimedOut(what: "the webhook receiver's port: \(tool.errors())")
        }
        self.tool = tool
        self.port = port
    }

    func url(_ mode: String) -> String { "http://127.0.0.1:\(port)/hook/\(mode)" }

    /// The next post it received (waiting for it).
    func next() async throws -> Post {
        guard let line = try await offThePool({ self.tool.readLine() }) else {
            throw TimedOut(what: "a post at the receiver: \(tool.errors())")
        }
        return try JSONDecoder().decode(Post.self, from: Data(line.utf8))
    }

    func posts(_ n: Int) async throws -> [Post] {
        var out: [Post] = []
        for _ in 0..<n { out.append(try await next()) }
        return out
    }

    /// Answers the posts it holds (`/hook/hold`), and every later one at once.
    func release() async throws {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/control/release")
        request.method = .POST
        do {
            _ = try await client.execute(request, timeout: .seconds(30))
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    func stop() { tool.terminate() }
}

/// A webhook hook to `url`.
func webhook(_ name: String, _ url: String, type: Hook.HookType = .webhook, kinds: Set<EventKind>? = nil) -> Hook {
    Hook(name: name, type: type, url: url, kinds: kinds, secret: Receiver.secret)
}

/// An event of `device`, the `n`th, of a geofence.
func event(_ device: String, _ n: Int, kind: EventKind = .geofenceEnter) -> DeviceEvent {
    DeviceEvent(
        id: EventID.make(device: device, kind: kind, subject: "depot", cause: "id:\(device):\(n)"), device: device,
        kind: kind, time: 1_700_000_000 + Double(n), latitude: 48.1, longitude: 11.5, details: .geofence("depot"))
}
