import Digests

/// The signature of a webhook's body, as GitHub signs its webhooks: `sha256=` and the lower-case
/// hex of HMAC-SHA256 keyed with the hook's secret over the body's exact bytes, in the
/// `X-KeepTrack-Signature` header. A receiver computes the same over the bytes it received and
/// compares in constant time (docs/events.md shows it in Python).
public enum EventSignature {
    /// The header that carries it.
    public static let header = "X-KeepTrack-Signature"
    /// The header that carries the event's id (a receiver's key for idempotency).
    public static let idHeader = "X-KeepTrack-Event-Id"
    /// The header that carries the event's kind.
    public static let kindHeader = "X-KeepTrack-Event"

    /// `sha256=<64 hex digits>`.
    public static func signature(body: [UInt8], secret: String) -> String {
        "sha256=" + Digests.hex(Digests.hmacSHA256(key: Array(secret.utf8), message: body))
    }

    /// Whether `signature` is `body`'s under `secret` (compared in constant time).
    public static func verify(_ signature: String, body: [UInt8], secret: String) -> Bool {
        let expected = Array(self.signature(body: body, secret: secret).utf8)
        let given = Array(signature.utf8)
        guard expected.count == given.count else { return false }
        var diff: UInt8 = 0
        for (a, b) in zip(expected, given) { diff |= a ^ b }
        return diff == 0
    }
}
