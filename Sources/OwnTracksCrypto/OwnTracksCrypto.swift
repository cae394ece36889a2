import CSodium
import Formats

/// OwnTracks' payload encryption with libsodium: `crypto_secretbox_easy` (XSalsa20-Poly1305) under
/// the passphrase's key (``OwnTracksSecret``), a random 24-byte nonce a message, sent as
/// `{"_type":"encrypted","data":BASE64(nonce | MAC | ciphertext)}` (``OwnTracksEnvelope``).
public enum OwnTracksCrypto {
    static let nonceBytes = Int(keeptrack_secretbox_noncebytes())
    static let macBytes = Int(keeptrack_secretbox_macbytes())

    /// `sodium_init()`, once (it is safe to call from several threads; later calls return 1).
    static let ready: Bool = sodium_init() >= 0

    /// `plaintext` sealed under `secret`: nonce, MAC and ciphertext (an envelope's `data`).
    public static func seal(_ plaintext: [UInt8], with secret: OwnTracksSecret) -> [UInt8] {
        precondition(ready, "libsodium could not be initialised")
        precondition(secret.key.count == Int(keeptrack_secretbox_keybytes()))
        var out = [UInt8](repeating: 0, count: nonceBytes + macBytes + plaintext.count)
        let status = out.withUnsafeMutableBufferPointer { o in
            randombytes_buf(o.baseAddress!, nonceBytes)
            // A byte more than the plaintext, so that an empty one is a buffer too.
            return (plaintext + [0]).withUnsafeBufferPointer { p in
                secret.key.withUnsafeBufferPointer { k in
                    crypto_secretbox_easy(
                        o.baseAddress! + nonceBytes, p.baseAddress!, UInt64(plaintext.count),
                        o.baseAddress!, k.baseAddress!)
                }
            }
        }
        precondition(status == 0, "crypto_secretbox_easy failed")
        return out
    }

    /// The plaintext of `data` (nonce, MAC, ciphertext), checked with its MAC.
    ///
    /// - Throws: ``OwnTracksCryptoError``: ``OwnTracksCryptoError/Code/malformed`` when `data` is
    ///   shorter than a nonce and a MAC, ``OwnTracksCryptoError/Code/notAuthentic`` when the MAC
    ///   does not match (another key, or changed bytes).
    public static func open(_ data: [UInt8], with secret: OwnTracksSecret) throws(OwnTracksCryptoError) -> [UInt8] {
        guard ready else { throw OwnTracksCryptoError(.library, "libsodium could not be initialised") }
        guard data.count >= nonceBytes + macBytes else {
            throw OwnTracksCryptoError(
                .malformed,
                "the encrypted data is \(data.count) bytes, fewer than a nonce "
                    + "and a MAC (\(nonceBytes + macBytes))")
        }
        let length = data.count - nonceBytes - macBytes
        // One byte more than the plaintext: an empty one still has a buffer to be written to.
        var out = [UInt8](repeating: 0, count: length + 1)
        let status = out.withUnsafeMutableBufferPointer { o in
            data.withUnsafeBufferPointer { d in
                secret.key.withUnsafeBufferPointer { k in
                    crypto_secretbox_open_easy(
                        o.baseAddress!, d.baseAddress! + nonceBytes,
                        UInt64(data.count - nonceBytes), d.baseAddress!, k.baseAddress!)
                }
            }
        }
        out.removeLast()
        guard status == 0 else {
            throw OwnTracksCryptoError(
                .notAuthentic,
                "the encrypted message does not authenticate with this "
                    + "device's secret (another secret, or changed on the way)")
        }
        return out
    }

    /// The message `{"_type":"encrypted","data":...}` carrying `message` sealed under `secret`.
    public static func encrypt(_ message: [UInt8], with secret: OwnTracksSecret) -> [UInt8] {
        OwnTracksEnvelope.encode(data: seal(message, with: secret))
    }

    /// The plaintext of an encrypted message, or `nil` when `message` is not one (a plain
    /// OwnTracks message, read as it is).
    ///
    /// - Throws: ``OwnTracksCryptoError``: ``OwnTracksCryptoError/Code/malformed`` or
    ///   ``OwnTracksCryptoError/Code/tooLarge`` for an envelope that can't be read (also a body
    ///   that is not one JSON object), ``OwnTracksCryptoError/Code/notAuthentic`` for one that
    ///   does not authenticate under `secret`.
    public static func decrypt(_ message: [UInt8], with secret: OwnTracksSecret) throws(OwnTracksCryptoError)
        -> [UInt8]?
    {
        guard let data = try envelopeData(message) else { return nil }
        return try open(data, with: secret)
    }

    /// The envelope's decoded `data`, or `nil` for a message that is not encrypted.
    ///
    /// - Throws: ``OwnTracksCryptoError`` (``OwnTracksCryptoError/Code/malformed``,
    ///   ``OwnTracksCryptoError/Code/tooLarge``) with the reading error as ``OwnTracksCryptoError/underlying``.
    public static func envelopeData(_ message: [UInt8]) throws(OwnTracksCryptoError) -> [UInt8]? {
        do {
            return try OwnTracksEnvelope.data(in: message)
        } catch {
            throw OwnTracksCryptoError(
                error.code == .tooLarge ? .tooLarge : .malformed,
                "an encrypted OwnTracks message: \(error.message)", underlying: error)
        }
    }
}
