import Formats
import OwnTracksCrypto
import Testing

/// OwnTracks' payload encryption against its published test vector, and what it refuses.
@Suite struct OwnTracksCryptoTests {
    /// The test vector OwnTracks publishes for its encryption (booklet, "Encryption"): key `s3cr1t`.
    static let vector = "vG0sAik3/+1KwrZ4b27yQtfJEVz6g2v0Os+yGIECNm8PnxwTR7ZUlUYRclgku7eP19FeNjJugxhYnF9pvlxDBzUxYg=="

    static func envelope(_ data: String) -> [UInt8] { Array("{\"_type\":\"encrypted\",\"data\":\"\(data)\"}".utf8) }

    @Test func thePublishedTestVectorDecrypts() throws {
        let secret = try OwnTracksSecret(passphrase: "s3cr1t")
        let plain = try #require(try OwnTracksCrypto.decrypt(Self.envelope(Self.vector), with: secret))
        // The C example sealed the string with its terminating NUL.
        #expect(plain == Array("Hello from C, how are you?".utf8) + [0])
    }

    @Test func theKeyIsThePassphrasesBytesCutAndPaddedTo32() throws {
        #expect(
            try OwnTracksSecret(passphrase: "s3cr1t").key == Array("s3cr1t".utf8) + [UInt8](repeating: 0, count: 26))
        let long = String(repeating: "x", count: 40)
        #expect(try OwnTracksSecret(passphrase: long).key == [UInt8](repeating: UInt8(ascii: "x"), count: 32))
        #expect(try OwnTracksSecret(passphrase: "é").key.prefix(3) == [0xC3, 0xA9, 0])
        #expect(throws: OwnTracksCryptoError.self) { try OwnTracksSecret(passphrase: "") }
        #expect(OwnTracksSecret.passphrase(inFile: Array("s3cr1t\r\n".utf8)) == Array("s3cr1t".utf8))
        #expect(OwnTracksSecret.passphrase(inFile: Array("s3cr1t\n\n".utf8)) == Array("s3cr1t\n".utf8))
    }

    @Test func whatIsEncryptedDecryptsWithTheSameSecretOnly() throws {
        let secret = try OwnTracksSecret(passphrase: "correct horse")
        let message = Array("{\"_type\":\"location\",\"tst\":1715688000,\"lat\":48.1,\"lon\":11.5}".utf8)
        let sealed = OwnTracksCrypto.encrypt(message, with: secret)
        #expect(String(decoding: sealed, as: UTF8.self).hasPrefix("{\"_type\":\"encrypted\",\"data\":\""))
        #expect(try OwnTracksCrypto.decrypt(sealed, with: secret) == message)
        // A new nonce each time: the same message never looks the same twice.
        #expect(OwnTracksCrypto.encrypt(message, with: secret) != sealed)
        let other = try OwnTracksSecret(passphrase: "battery staple")
        let error = #expect(throws: OwnTracksCryptoError.self) { try OwnTracksCrypto.decrypt(sealed, with: other) }
        #expect(error?.code == .notAuthentic)
        #expect(try OwnTracksCrypto.decrypt(OwnTracksCrypto.encrypt([], with: secret), with: secret) == [])
    }

    @Test func aPlainMessageIsNotAnEnvelope() throws {
        let secret = try OwnTracksSecret(passphrase: "s3cr1t")
        #expect(try OwnTracksCrypto.decrypt(Array("{\"_type\":\"location\",\"lat\":1}".utf8), with: secret) == nil)
        #expect(try OwnTracksCrypto.decrypt(Array("{}".utf8), with: secret) == nil)
        // Not JSON, or not read as far as an encrypted _type: the plain reader's to refuse.
        for body in ["not json", "[]", "", "{\"_type\":1,\"data\":\"QUJD\"}", "{\"data\":\"QUJD\",\"x\":"] {
            #expect(try OwnTracksCrypto.decrypt(Array(body.utf8), with: secret) == nil, "\(body)")
        }
    }

    /// Hostile envelopes: each refused with a code and a sentence, none decrypted.
    @Test(arguments: [
        ("{\"_type\":\"encrypted\"}", OwnTracksCryptoError.Code.malformed),
        ("{\"_type\":\"encrypted\",\"data\":42}", .malformed),
        ("{\"_type\":\"encrypted\",\"data\":\"%%%%\"}", .malformed),
        ("{\"_type\":\"encrypted\",\"data\":\"QUJD=A\"}", .malformed),
        ("{\"_type\":\"encrypted\",\"data\":\"QQ\"} trailing", .malformed),
        ("{\"_type\":\"encrypted\",\"data\":\"QUJDREVGR0g=\"}", .malformed),
        ("{\"_type\":\"encrypted\",\"data\":\"\"}", .malformed),
        ("{\"_type\":\"encrypted\",\"data\":\"QUJD\",", .malformed),
        ("{\"data\":\"QUJD\",\"_type\":\"encrypted\"", .malformed),
    ])
    func refusesHostileEnvelopes(body: String, code: OwnTracksCryptoError.Code) throws {
        let secret = try OwnTracksSecret(passphrase: "s3cr1t")
        let error = #expect(throws: OwnTracksCryptoError.self) {
            try OwnTracksCrypto.decrypt(Array(body.utf8), with: secret)
        }
        #expect(error?.code == code)
        #expect(error?.message.isEmpty == false)
    }

    @Test func refusesAFlippedBitAnywhereInTheData() throws {
        let secret = try OwnTracksSecret(passphrase: "s3cr1t")
        let data = try #require(Base64.decode(Array(Self.vector.utf8)))
        for i in data.indices {
            var changed = data
            changed[i] ^= 0x01
            let error = #expect(throws: OwnTracksCryptoError.self) {
                try OwnTracksCrypto.decrypt(OwnTracksEnvelope.encode(data: changed), with: secret)
            }
            #expect(error?.code == .notAuthentic)
        }
    }

    @Test func refusesTruncatedEnvelopesByteByByte() throws {
        let secret = try OwnTracksSecret(passphrase: "s3cr1t")
        let whole = Self.envelope(Self.vector)
        // Cut anywhere, it never decrypts: refused once its `_type` was read, not an envelope before.
        let typeRead = "{\"_type\":\"encrypted\"".utf8.count
        for n in 0..<whole.count {
            if n < typeRead {
                #expect(try OwnTracksCrypto.decrypt(Array(whole.prefix(n)), with: secret) == nil)
            } else {
                #expect(throws: OwnTracksCryptoError.self) {
                    try OwnTracksCrypto.decrypt(Array(whole.prefix(n)), with: secret)
                }
            }
        }
    }

    @Test func refusesAHugeEnvelopeAsTooLarge() throws {
        let secret = try OwnTracksSecret(passphrase: "s3cr1t")
        let data = String(repeating: "A", count: (OwnTracksEnvelope.maxDataBytes / 3 + 8) * 4)
        let error = #expect(throws: OwnTracksCryptoError.self) {
            try OwnTracksCrypto.decrypt(Self.envelope(data), with: secret)
        }
        #expect(error?.code == .tooLarge)
        // Deep nesting beside the data is refused, not recursed into.
        let deep = "{\"_type\":\"encrypted\",\"x\":" + String(repeating: "[", count: 100_000) + "}"
        #expect(throws: OwnTracksCryptoError.self) { try OwnTracksCrypto.decrypt(Array(deep.utf8), with: secret) }
        // Before an encrypted `_type`: not an envelope (the plain reader refuses it the same way).
        let plainDeep = "{\"x\":" + String(repeating: "[", count: 100_000) + "}"
        #expect(try OwnTracksCrypto.decrypt(Array(plainDeep.utf8), with: secret) == nil)
    }

    @Test func base64RoundTripsEveryLengthAndRefusesWhatIsNot() {
        for n in 0..<64 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64.decode(Array(Base64.encode(bytes).utf8)) == bytes)
            // Unpadded, as some encoders write it.
            let unpadded = Base64.encode(bytes).filter { $0 != "=" }
            #expect(Base64.decode(Array(unpadded.utf8)) == bytes)
        }
        #expect(Base64.decode(Array("QUJD\nREVG".utf8)) == Array("ABCDEF".utf8))
        for bad in ["Q", "QU=A", "QUI=x", "QR==", "QUJ-", "====", "QUJD="] {
            #expect(Base64.decode(Array(bad.utf8)) == nil, "\(bad)")
        }
    }
}
