/// OwnTracks' encrypted form, as the apps and the Recorder send it: `{"_type":"encrypted","data":BASE64}`,
/// `data` being `nonce (24 bytes) | MAC (16) | ciphertext` of libsodium's `crypto_secretbox_easy`.
/// This reads and writes the envelope only (the JSON and the base64); the cipher is the
/// `OwnTracksCrypto` library's (libsodium).
public enum OwnTracksEnvelope {
    /// The bytes of a nonce and a MAC: the shortest `data` there is (an empty message).
    public static let overhead = 24 + 16
    /// The most bytes `data` may decode to. OwnTracks messages are a few hundred bytes, a
    /// Recorder's answer some kilobytes: 1 MiB leaves room and bounds the work a body can cause.
    public static let maxDataBytes = 1 << 20

    /// The decoded `data` of an encrypted message (nonce, MAC and ciphertext), or `nil` when
    /// `bytes` is not one: a JSON object of another `_type` (a plain message), or bytes that are
    /// not JSON before an encrypted `_type` is read (the plain reader refuses them). Members other
    /// than `_type` and `data` are skipped (a nested value up to ``JSONScanner``'s depth).
    ///
    /// - Throws: ``FormatsError`` for an encrypted message that is malformed JSON after its
    ///   `_type`, or whose `data` is missing, not a string, not base64, shorter than ``overhead``
    ///   or longer than ``maxDataBytes`` (``FormatsError/Code/tooLarge``).
    public static func data(in bytes: [UInt8]) throws(FormatsError) -> [UInt8]? {
        var s = JSONScanner(bytes)
        var type: String?
        var text: String?
        var sawData = false
        do throws(FormatsError) {
            try s.members { (s, key) throws(FormatsError) in
                switch key {
                case "_type":
                    if case .string(let t) = try s.value() { type = t }
                case "data":
                    sawData = true
                    if case .string(let t) = try s.value() { text = t }
                default:
                    try s.skipValue()
                }
            }
            guard s.atEnd else { throw s.fail("text after the object") }
        } catch {
            // Not read as far as an encrypted `_type`: not an encrypted message (the plain reader
            // says what is wrong with it).
            guard type == "encrypted" else { return nil }
            throw error
        }
        guard type == "encrypted" else { return nil }
        guard sawData else { throw FormatsError(.invalid, "data: missing from an encrypted message") }
        guard let text else { throw FormatsError(.invalid, "data: expected a base64 string") }
        let utf8 = Array(text.utf8)
        // 4 characters carry 3 bytes: refuse before decoding what would be too large.
        guard utf8.count / 4 * 3 <= maxDataBytes + 3 else {
            throw FormatsError(.tooLarge, "data: longer than \(maxDataBytes) bytes")
        }
        guard let decoded = Base64.decode(utf8) else { throw FormatsError(.invalid, "data: not base64") }
        guard decoded.count <= maxDataBytes else {
            throw FormatsError(.tooLarge, "data: longer than \(maxDataBytes) bytes")
        }
        guard decoded.count >= overhead else {
            throw FormatsError(.invalid, "data: \(decoded.count) bytes, fewer than a nonce and a MAC (\(overhead))")
        }
        return decoded
    }

    /// The message `{"_type":"encrypted","data":BASE64}` for `data` (nonce, MAC and ciphertext).
    public static func encode(data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(32 + (data.count + 2) / 3 * 4)
        ByteWriting.appendStatic("{\"_type\":\"encrypted\",\"data\":\"", to: &out)
        Base64.append(data, to: &out)
        ByteWriting.appendStatic("\"}", to: &out)
        return out
    }
}

/// Base64 with the standard alphabet (RFC 4648 section 4), as OwnTracks writes it.
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Appends `bytes` encoded, padded with `=`.
    public static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [
                alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)],
            ]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
    }

    /// `bytes` encoded, padded with `=`.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes `text` encodes, or `nil` when it is not base64: a character outside the alphabet,
    /// a lone last character, padding other than at the end, or bits left over in the last
    /// character. Padding may be left out; line breaks (as some encoders wrap lines) are skipped.
    public static func decode(_ text: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 4 * 3 + 2)
        var n: UInt32 = 0
        var count = 0
        var padding = 0
        for c in text {
            let v: UInt32
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = UInt32(c - 65)
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = UInt32(c - 71)
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt32(c) + 4
            case UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            case 0x0A, 0x0D: continue
            default: return nil
            }
            guard padding == 0 else { return nil }
            n = n << 6 | v
            count += 1
            if count == 4 {
                out += [UInt8(n >> 16), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
                (n, count) = (0, 0)
            }
        }
        switch count {
        case 0: return padding == 0 ? out : nil
        case 2:
            guard n & 0xF == 0, padding == 0 || padding == 2 else { return nil }
            out.append(UInt8(n >> 4))
        case 3:
            guard n & 0x3 == 0, padding == 0 || padding == 1 else { return nil }
            out += [UInt8(n >> 10), UInt8(n >> 2 & 0xFF)]
        default: return nil
        }
        return out
    }
}
