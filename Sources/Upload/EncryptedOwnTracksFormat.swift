import Formats
import OwnTracksCrypto

/// OwnTracks with payload encryption (``OwnTracksFormat`` otherwise): each record goes as
/// `{"_type":"encrypted","data":...}` sealed under the device's secret, as the apps send it when
/// a secret is set, over HTTP and MQTT alike. A Recorder that holds the key answers with its reply
/// array encrypted the same way: that answer must open under the same secret (it is then taken as
/// the answer); one that does not was sealed under another key, so the server could not read what
/// we sent either, and the record stays for the next attempt. A plain answer (`[]`) is taken as
/// OwnTracks takes any 2xx.
public struct EncryptedOwnTracksFormat: UploadFormat {
    public let secret: OwnTracksSecret
    let plain = OwnTracksFormat()

    public init(secret: OwnTracksSecret) { self.secret = secret }

    public var name: String { plain.name }
    public var serverPath: String { plain.serverPath }
    public var recordsPerRequest: Int? { plain.recordsPerRequest }

    public func deviceOnServer(_ device: String, settings: UploadFormatSettings) -> String {
        plain.deviceOnServer(device, settings: settings)
    }

    public func request(for records: [TrailRecord], device: String, settings: UploadFormatSettings) -> UploadRequest? {
        guard var request = plain.request(for: records, device: device, settings: settings) else { return nil }
        request.body = OwnTracksCrypto.encrypt(request.body, with: secret)
        return request
    }

    public func problemWithAcknowledgement(_ body: [UInt8]) -> String? {
        do {
            _ = try OwnTracksCrypto.decrypt(body, with: secret)
            return nil
        } catch  where error.code == .notAuthentic {
            return "an encrypted answer that does not open with our secret (the server holds another key for "
                + "this device, so it could not read the record either)"
        } catch {
            // Not an envelope we can read: not encrypted, as OwnTracks takes any 2xx.
            return nil
        }
    }
}

extension Uploader.Configuration {
    /// The format records are published in over MQTT: OwnTracks, encrypted when the configured format is.
    var mqttFormat: any UploadFormat { format is EncryptedOwnTracksFormat ? format : OwnTracksFormat() }
}
