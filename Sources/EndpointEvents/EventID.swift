import Digests

/// Event ids: a UUID (RFC 9562's version 8, name-based with SHA-256, as its appendix B.2 shows)
/// derived from what caused the event, so that evaluating the same cause again (a batch sent twice,
/// a replay, another instance) gives the same id, and a store or receiver that keeps ids once keeps
/// the event once.
///
/// The name hashed is `keeptrack-event/1`, the device, the kind, the subject (a geofence; empty
/// otherwise) and the cause (a record's store key, or a time in milliseconds), each followed by a
/// NUL byte: no two causes share a name, and an id says nothing of its cause (a store key can hold
/// a position).
public enum EventID {
    /// The id of the event of `kind` on `device` about `subject` (a geofence), caused by `cause`.
    public static func make(device: String, kind: EventKind, subject: String?, cause: String) -> String {
        var name: [UInt8] = Array("keeptrack-event/1".utf8)
        name.append(0)
        for part in [device, kind.rawValue, subject ?? "", cause] {
            name += part.utf8
            name.append(0)
        }
        var bytes = Array(Digests.sha256(name).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return uuidText(bytes)
    }

    /// A time as a cause: whole milliseconds since 1970 (`t1700000000123`).
    public static func time(_ seconds: Double) -> String {
        let ms = (seconds * 1000).rounded()
        guard ms.isFinite, abs(ms) < 9e18 else { return "t\(seconds)" }
        return "t\(Int64(ms))"
    }

    /// `xxxxxxxx-xxxx-8xxx-yxxx-xxxxxxxxxxxx`, lower case.
    static func uuidText(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (i, b) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` has an event id's form (36 characters, lower-case hex in UUID groups).
    public static func isWellFormed(_ text: String) -> Bool {
        let u = Array(text.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !((c >= 48 && c <= 57) || (c >= 97 && c <= 102)) {
                return false
            }
        }
        return true
    }
}
