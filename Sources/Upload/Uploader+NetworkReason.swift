import AsyncHTTPClient
import Glibc
import NIOCore
import NIOSSL

extension Uploader {
    /// A request's failure without an answer, as a user reads it: what happened, with `host`, and
    /// what to do where there is something to do. Not the client's own wording
    /// (`HTTPClientError.deadlineExceeded`, BoringSSL's error stack with a build path).
    static func failure(_ error: any Error, host: String, timeout: Double) -> Response {
        switch error {
        case let io as IOError:
            // A system error by its name (`connection refused`), as hooks say it (`WebhookDelivery.reason`),
            // not NIO's wording (`connection reset (error set): Connection refused) (errno: 111)`).
            return .failure("cannot reach \(host): \(reason(io))")
        case let http as HTTPClientError where http == .deadlineExceeded || http == .readTimeout:
            return .failure("\(host) did not answer within \(Int(timeout)) s")
        case let http as HTTPClientError where http == .connectTimeout:
            return .failure("cannot reach \(host): no connection within \(Int(min(5, timeout))) s")
        case let http as HTTPClientError where http == .remoteConnectionClosed:
            return .failure("\(host) closed the connection before answering")
        case let tls as NIOSSLError:
            guard case .handshakeFailed = tls else { return .failure("TLS with \(host) failed: \(tls)") }
            return .untrusted(
                "the TLS handshake with \(host) failed: its certificate is not trusted here (a private CA "
                    + "or a self-signed certificate: trust it with a CA file), or it does not speak TLS there")
        default:
            return .failure("cannot reach \(host): \(error)")
        }
    }

    /// A system error by its name (`connection refused`). In a file of its own: Glibc's names (`wait`)
    /// would shadow the uploader's.
    static func reason(_ error: IOError) -> String {
        String(cString: strerror(error.errnoCode)).lowercased()
    }
}
