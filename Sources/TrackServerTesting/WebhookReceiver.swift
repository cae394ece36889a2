import Foundation
import KeepTrackTesting

/// `tools/webhook-receiver.py` for the endpoint's tests: a real HTTP receiver on 127.0.0.1 that
/// checks each post's signature (in Python, as docs/events.md shows) and processes each event id
/// once; one JSON line per post, read here.
public final class WebhookReceiver: Sendable {
    public struct Post: Decodable, Sendable {
        public var path: String
        public var id: String
        public var kind: String
        public var device: String
        public var bodyId: String
        public var valid: Bool
        public var first: Bool
        public var status: Int
    }

    let tool: Tool
    public let port: Int
    public static let secret = "a secret of more than 16 bytes"

    public init(seed: Int = 1) async throws {
        let tool = try Tool("tools/webhook-receiver.py", [Self.secret, "--seed", "\(seed)"])
        tool.guardAgainstHang(seconds: 300)
        guard let line = try await offThePool({ tool.readLine() }), let port = Int(line) else {
            throw TimedOut(what: "the webhook receiver's port: \(tool.errors())")
        }
        self.tool = tool
        self.port = port
    }

    /// The URL of a mode (`ok`, `fail`, `flaky`, `redirect?to=URL`...).
    public func url(_ mode: String) -> String { "http://127.0.0.1:\(port)/hook/\(mode)" }

    /// The next post it received (waiting for it, off the pool).
    public func next() async throws -> Post {
        guard let line = try await offThePool({ self.tool.readLine() }) else {
            throw TimedOut(what: "a post at the receiver: \(tool.errors())")
        }
        return try JSONDecoder().decode(Post.self, from: Data(line.utf8))
    }

    /// Posts until `n` distinct event ids were processed (answered 2xx once); all the posts read.
    public func untilProcessed(_ n: Int) async throws -> [Post] {
        var posts: [Post] = []
        var processed = 0
        while processed < n {
            let p = try await next()
            posts.append(p)
            if p.first && p.valid && (200..<300).contains(p.status) { processed += 1 }
        }
        return posts
    }

    public func stop() { tool.terminate() }
}
