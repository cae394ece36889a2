import HTTPTypes
import Hummingbird
import NIOCore
import TrackStore

/// The request context of every route: Hummingbird's, plus the connection (to refuse or drop it), the
/// fault decision and who sent the request.
struct ServerContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    /// Whether the fault injection drops the answer halfway (``FaultMiddleware``).
    var drop = false
    /// Who sent the request (``AccessMiddleware``); everyone is the admin when no credential exists.
    var identity = Identity.admin
    /// The user of an HTTP Basic credential, if any.
    var basicUser: String?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    var maxUploadSize: Int { 8 << 20 }

    /// Throws 403 unless the request may write or read `device`. Nobody (``Identity/anonymous``) is
    /// let in only by OsmAnd's route, which decides by the device (``IngestRoutes``).
    func authorize(device: String) throws {
        switch identity {
        case .admin: return
        case .device(let own) where own == device: return
        case .device(let own):
            throw HTTPError(
                .forbidden, message: "this token belongs to device '\(own)': it may not write or read '\(device)'")
        case .share(let grant) where grant.device == device: return
        case .share(let grant):
            throw HTTPError(.forbidden, message: "this share link shows device '\(grant.device)' only")
        case .anonymous:
            throw AccessMiddleware.unauthorized()
        }
    }

    /// Throws 403 unless the request is the admin's.
    func requireAdmin() throws {
        guard identity == .admin else { throw HTTPError(.forbidden, message: "only the admin token may do this") }
    }

    /// The device id of the route's `{id}` path segment, percent-decoded.
    func pathDevice() throws -> String {
        let raw = parameters.get("id") ?? ""
        guard let id = PercentEncoding.decode(raw) else {
            throw HTTPError(.badRequest, message: "the device id in the path is not valid percent-encoded UTF-8")
        }
        return id
    }

    /// Closes the connection once the answer to its current request is written and the rest of its
    /// body read and thrown away, or ``BodyTimeoutHandler/linger`` after the answer.
    func closeAfterAnswer() {
        channel.pipeline.fireUserInboundEventTriggered(CloseAfterAnswer())
    }
}

/// Who a request is: the admin (the token, or anyone when no token and no device credential exist),
/// one device (its own token), or nobody (no credential: only OsmAnd ingest, which carries none, gets
/// this far).
enum Identity: Sendable, Equatable {
    case admin
    case device(String)
    case anonymous
    /// A share link (``ShareRoutes``): one device, read-only, within a window; let in by
    /// ``AccessMiddleware`` on the routes a share reads only.
    case share(ShareGrant)

    /// The only device this identity may read (and write), or `nil` for all.
    var onlyDevice: String? {
        switch self {
        case .device(let id): id
        case .share(let grant): grant.device
        case .admin, .anonymous: nil
        }
    }

    /// The time window a share link shows, or `nil` for everyone else.
    var window: (from: Double, to: Double)? {
        guard case .share(let grant) = self else { return nil }
        return (grant.from, grant.to)
    }
}

/// What a share link lets a request read: its device within its window (infinite when it has none).
struct ShareGrant: Sendable, Equatable {
    let id: String
    let device: String
    let from: Double
    let to: Double
}
