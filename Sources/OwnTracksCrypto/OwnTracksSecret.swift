/// The key of OwnTracks' payload encryption, made from the passphrase as the apps and the
/// Recorder make it: its UTF-8 bytes, cut at 32 and padded with zeros to 32 (no key derivation).
/// Two passphrases that agree in their first 32 bytes are the same key.
public struct OwnTracksSecret: Sendable, Equatable {
    /// The 32 bytes of a `crypto_secretbox` key.
    public let key: [UInt8]

    /// The key of `passphrase`.
    ///
    /// - Throws: ``OwnTracksCryptoError`` (``OwnTracksCryptoError/Code/emptySecret``) for an
    ///   empty passphrase.
    public init(passphrase: String) throws(OwnTracksCryptoError) {
        try self.init(bytes: Array(passphrase.utf8))
    }

    /// The key of a passphrase's bytes (what a secret file holds, its last line break removed).
    ///
    /// - Throws: ``OwnTracksCryptoError`` for no bytes.
    public init(bytes: [UInt8]) throws(OwnTracksCryptoError) {
        guard !bytes.isEmpty else { throw OwnTracksCryptoError(.emptySecret, "the secret is empty") }
        var key = Array(bytes.prefix(32))
        key += [UInt8](repeating: 0, count: 32 - key.count)
        self.key = key
    }

    /// The passphrase in a secret file's bytes: the file without one final line break (`\n` or
    /// `\r\n`), as an editor or `echo` leaves it.
    public static func passphrase(inFile bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        if b.last == 0x0A { b.removeLast() }
        if b.last == 0x0D { b.removeLast() }
        return b
    }
}

extension OwnTracksSecret {
    /// A secret from its key as a store kept it (``key``).
    ///
    /// - Throws: ``OwnTracksCryptoError`` unless `key` is 32 bytes.
    public init(key: [UInt8]) throws(OwnTracksCryptoError) {
        guard key.count == 32 else { throw OwnTracksCryptoError(.malformed, "a key is 32 bytes, got \(key.count)") }
        self.key = key
    }
}
