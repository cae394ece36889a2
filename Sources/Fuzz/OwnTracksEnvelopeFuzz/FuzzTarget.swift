import Formats
import OwnTracksCrypto

/// A fixed key: the published test vector's (`s3cr1t`).
let secret = try! OwnTracksSecret(passphrase: "s3cr1t")

/// `OwnTracksCrypto.decrypt` on any body: never a crash; a rejection is an `OwnTracksCryptoError`
/// with a message; what decrypts is what was sealed (seal → encode → decrypt gives it back); and an
/// envelope's decoded data, encoded again, reads back as the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    do throws(OwnTracksCryptoError) {
        if let inner = try OwnTracksCrypto.envelopeData(bytes) {
            precondition(inner.count >= OwnTracksEnvelope.overhead, "an envelope shorter than a nonce and a MAC")
            let again = try? OwnTracksEnvelope.data(in: OwnTracksEnvelope.encode(data: inner))
            precondition(again == inner, "data(encode(data)) != data")
            _ = try? OwnTracksCrypto.open(inner, with: secret)
        }
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
    }
    // Any bytes, sealed, come back.
    let sealed = OwnTracksCrypto.encrypt(bytes, with: secret)
    let opened = try? OwnTracksCrypto.decrypt(sealed, with: secret)
    precondition(opened == bytes, "decrypt(encrypt(x)) != x")
    return 0
}
