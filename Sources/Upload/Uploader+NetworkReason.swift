import Glibc
import NIOCore

extension Uploader {
    /// A system error as a user reads it, by its name (`connection refused`), as hooks say it
    /// (`WebhookDelivery.reason`). In a file of its own: Glibc's names (`wait`) would shadow the
    /// uploader's.
    static func reason(_ error: IOError) -> String {
        String(cString: strerror(error.errnoCode)).lowercased()
    }
}
