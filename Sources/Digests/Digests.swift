import CSodium

/// SHA-256 and HMAC-SHA-256 from libsodium, the one cryptographic library KeepTrack's own code links
/// (Debian's libsodium23, which OwnTracks' encryption needs already): event ids (`EventID`), device
/// token digests (`DeviceTokens`) and webhook signatures (`EventSignature`).
public enum Digests {
    /// `sodium_init()`, once: libsodium asks for it before any other call (it is safe from several
    /// threads; later calls return 1).
    static let ready: Bool = sodium_init() >= 0

    /// The SHA-256 digest of `bytes` (32 bytes).
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        precondition(ready, "libsodium did not initialise")
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        let status = bytes.withUnsafeBufferPointer { input in
            crypto_hash_sha256(&digest, input.baseAddress, UInt64(input.count))
        }
        precondition(status == 0, "crypto_hash_sha256 failed")
        return digest
    }

    /// HMAC-SHA-256 of `message` keyed with `key` (RFC 2104; a key of any length: one longer than
    /// 64 bytes is hashed first, as the RFC says), 32 bytes.
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        precondition(ready, "libsodium did not initialise")
        var state = crypto_auth_hmacsha256_state()
        var code = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        // The key's pointer may not be null (`nonnull`), even for no bytes: an empty key is read from one.
        let keyed = (key.isEmpty ? [0] : key).withUnsafeBufferPointer {
            crypto_auth_hmacsha256_init(&state, $0.baseAddress!, key.count)
        }
        let fed = message.withUnsafeBufferPointer {
            crypto_auth_hmacsha256_update(&state, $0.baseAddress, UInt64($0.count))
        }
        let ended = crypto_auth_hmacsha256_final(&state, &code)
        precondition(keyed == 0 && fed == 0 && ended == 0, "crypto_auth_hmacsha256 failed")
        return code
    }

    /// `bytes` in lower-case hex.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
