import Formats
import HummingbirdWebSocket
import NIOCore
import TrackStore

/// The OwnTracks Recorder's `/ws/last` WebSocket (docs/owntracks-recorder-api.md): the client sends
/// `LAST` and is sent the latest location of each device it may see, one Recorder location object
/// per text frame (the objects of `/api/0/last`); then a location object for every location stored,
/// as it arrives. `?user=U&device=D` narrows to that device, `?user=U` to that user's devices.
/// Authentication and refusals are the live stream's (``LiveStream/access(_:)``).
extension LiveStream {
    /// The path of the Recorder's WebSocket.
    static let recorderPath = "/ws/last"

    /// The text a client sends to be sent each device's latest location.
    static let recorderLastRequest = "LAST"

    /// The device a `/ws/last` request narrows to: the Recorder's `?user=U&device=D` (the device id
    /// `U/D`, or `U` when both are the same and only that exists), else none.
    func recorderDevice(user: String?, device: String?) async throws -> String? {
        guard let user, let device, !user.isEmpty, !device.isEmpty else { return nil }
        let ids = RecorderAPI.deviceIDs(user: user, device: device)
        for id in ids where try await !store.latest(device: id).isEmpty { return id }
        return ids.first ?? "\u{1}"
    }

    /// Whether the stored device `id` is one of the Recorder user `user`'s (as `/api/0/last?user=`
    /// reads it: the user name of ``RecorderAPI/names(of:)``, or the same in lower case).
    static func recorderUser(_ user: String, owns id: String) -> Bool {
        let u = RecorderAPI.names(of: id).user
        return u == user || u.lowercased() == user.lowercased()
    }

    /// The frames `LAST` is answered with: each visible device's latest location.
    func recorderLastFrames(_ scope: Scope) async throws -> [StreamHub.Frame] {
        var frames: [StreamHub.Frame] = []
        for position in try await store.latest(device: scope.device)
        where scope.device != nil || scope.user.map({ Self.recorderUser($0, owns: position.device) }) ?? true {
            var out: [UInt8] = []
            RecorderAPI.appendLocation(try await store.latestRecord(position), received: false, to: &out)
            frames.append(StreamHub.Frame(text: ByteBuffer(bytes: out)))
        }
        return frames
    }
}

extension StreamEncoding {
    /// `/ws/last`'s frames: each stored location as the Recorder's location object (`_type`, `lat`,
    /// `lon`, `tst`, `topic`, `username`, `device`, ...); other kinds of records and events are not sent.
    /// Nor is a location with no position (0,0: the server marks it an outlier at once): the Recorder's
    /// protocol cannot take back a location it sent, so the other outliers (an inaccurate fix, which the
    /// OwnTracks Frontend draws with its accuracy circle; a jump, known only at the next point) go as
    /// they came, and their marks are not told.
    static let recorderLocation = StreamEncoding(name: "recorder-location") { r in
        guard r.kind == .location, r.valid, r.latitude != 0 || r.longitude != 0 else { return nil }
        var out: [UInt8] = []
        RecorderAPI.appendLocation(r, received: false, to: &out)
        return StreamHub.Frame(text: ByteBuffer(bytes: out))
    }
}
