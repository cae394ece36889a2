import ArgumentParser
import Geo
import OwnTracksCrypto
import SystemIO
import TrackServer
import TrackStore
import Tracking
import Upload

#if canImport(Glibc)
    import Glibc
#endif

/// `--secret-file FILE`: OwnTracks' payload encryption for `track` and `replay` (docs/owntracks-encryption.md).
enum SecretFile {
    /// The secret in `path` (the file's bytes without one final line break), or the sentence to say.
    static func read(_ path: String) throws(ValidationError) -> OwnTracksSecret {
        let bytes: [UInt8]
        do {
            bytes = try readFile(path)
        } catch {
            throw ValidationError("--secret-file \(path): \(error)")
        }
        guard bytes.count <= 4096 else {
            throw ValidationError("--secret-file \(path): more than 4096 bytes; it holds one passphrase")
        }
        do {
            return try OwnTracksSecret(bytes: OwnTracksSecret.passphrase(inFile: bytes))
        } catch {
            throw ValidationError("--secret-file \(path) is empty: it holds the passphrase set in the OwnTracks app")
        }
    }

    /// Checks `--secret-file` with the other upload options.
    static func validate(_ path: String?, upload: String?, format: String) throws(ValidationError) {
        guard let path else { return }
        guard upload != nil else { throw ValidationError("--secret-file goes with --upload URL.") }
        guard format == OwnTracksFormat().name else {
            throw ValidationError("--secret-file encrypts OwnTracks payloads: it goes with --format owntracks.")
        }
        _ = try read(path)
    }
}

extension Serve.Devices {
    /// `keeptrack serve devices secret USER/DEVICE`: the device's OwnTracks secret, read from standard
    /// input (never from the command line, where `ps` shows it).
    struct Secret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set an OwnTracks device's encryption secret, read from standard input (or remove it).",
            discussion: """
                The secret is the passphrase set in the OwnTracks app (Preferences, Connection, Secret \
                encryption key); its first line is read from standard input, never from the command \
                line. serve then decrypts the device's encrypted messages (HTTP and MQTT) and refuses \
                what does not authenticate. The key is stored as is in serve's --db: protect the \
                database as the secret (docs/owntracks-encryption.md).

                Examples:
                  keeptrack serve devices secret anna/phone < anna-phone.secret
                  keeptrack serve devices secret anna/phone --remove
                """)
        @Argument(help: "The OwnTracks device: USER/DEVICE (as in the topic owntracks/USER/DEVICE).") var id: String
        @Flag(help: "Remove the device's secret instead.") var remove = false
        @ParentCommand var serve: Serve

        func validate() throws {
            guard DeviceSecrets.ownTracksDevice(id) != nil else {
                throw ValidationError("the device is USER/DEVICE (OwnTracks' user and device), got '\(id)'.")
            }
        }

        func run() async throws {
            let device = DeviceSecrets.ownTracksDevice(id)!
            if remove {
                let (removed, location) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.removeSecret(device: device), store.location)
                }
                guard removed else { throw CommandFailure("device '\(device)' has no secret in \(location)") }
                print("removed the secret of \(device)")
                return
            }
            let input: [UInt8]
            do {
                input = try readFile("/dev/stdin")
            } catch {
                throw CommandFailure("cannot read the secret from standard input: \(error)")
            }
            let line = input.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false).first ?? []
            let secret: OwnTracksSecret
            do {
                secret = try OwnTracksSecret(bytes: OwnTracksSecret.passphrase(inFile: Array(line)))
            } catch {
                throw CommandFailure(
                    "no secret on standard input: give the passphrase set in the app, e.g. "
                        + "keeptrack serve devices secret \(device) < FILE")
            }
            let location = try await serve.withDeviceTokens(creating: true) { store in
                try await store.setSecret(device: device, secret: secret, now: WallClock.seconds())
                return store.location
            }
            print("set the secret of \(device) in \(location)")
        }
    }
}

extension UploadOptions {
    /// With `--upload embedded --secret-file`: the embedded endpoint holds the device's secret, as a
    /// Recorder given the key does, so that what is sent encrypted is stored.
    func shareSecret(with embedded: TrackServer?, tracker: Tracker) async throws {
        guard let embedded, let index = embeddedIndex, let secretFile = Self.value(secretFile, index),
            let device = tracker.uploadService?.deviceOnServer(target: index)
        else { return }
        try await embedded.store.setSecret(
            device: device, secret: try SecretFile.read(secretFile), now: WallClock.seconds())
    }
}
