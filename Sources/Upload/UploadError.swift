/// An upload-side error: a code, a sentence naming what and where, and the cause.
public struct UploadError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// The outbox file cannot be opened, read or written (a full disk, permissions).
        case storage
        /// The outbox belongs to another device.
        case deviceMismatch = "device-mismatch"
        /// The endpoint's URL or TLS settings cannot be used.
        case configuration
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
