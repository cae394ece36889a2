import Formats
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The body of every refusal the server answers:
/// `{"error":{"code":"malformed-json","message":"..."}}`, whoever writes it: a route, a middleware,
/// Hummingbird's router (no such route), the connection cap's 503 (``RefuseHandler``), the head
/// guard's 400, the stream's 401 and 426. The one exception is OsmAnd's unknown device, answered as
/// Traccar answers it (an empty 400 or 404).
///
/// `code` is stable and machine-readable: a ``FormatsError/Code`` for a body that does not decode
/// (`malformed-json`, `invalid`, `too-large`, `unsupported`), ``ErrorAnswer/Code/internalError`` for
/// a failure of the server's own (a store down), else the status in words (`bad-request`,
/// `not-found`, ...). `message` is a sentence for people, never a coordinate.
public struct ErrorAnswer: Error, Hashable, Sendable, HTTPResponseError {
    /// What kind of refusal it is.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The server failed (its store is down, a bug): the cause is in its log, not in the answer.
        public static let internalError = Code(rawValue: "internal-error")
        /// A failure the fault injection made (``Faults``), of its status.
        public static let injectedFailure = Code(rawValue: "injected-failure")

        /// The code of an answer with this status and no more precise code.
        public init(status: HTTPResponse.Status) {
            switch status.code {
            case 400: self = Code(rawValue: "bad-request")
            case 401: self = Code(rawValue: "unauthorized")
            case 403: self = Code(rawValue: "forbidden")
            case 404: self = Code(rawValue: "not-found")
            case 405: self = Code(rawValue: "method-not-allowed")
            case 408: self = Code(rawValue: "request-timeout")
            case 409: self = Code(rawValue: "conflict")
            case 410: self = Code(rawValue: "gone")
            case 413: self = Code(rawValue: "content-too-large")
            case 415: self = Code(rawValue: "unsupported-media-type")
            case 416: self = Code(rawValue: "range-not-satisfiable")
            case 426: self = Code(rawValue: "upgrade-required")
            case 429: self = Code(rawValue: "too-many-requests")
            case 500: self = .internalError
            case 503: self = Code(rawValue: "service-unavailable")
            default: self = Code(rawValue: "status-\(status.code)")
            }
        }
    }

    /// The message of ``Code/internalError`` answers.
    public static let internalMessage = "the server failed to answer this request; its log says why"

    public var status: HTTPResponse.Status
    public var code: Code
    /// A sentence for people (no coordinates).
    public var message: String
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, code: Code? = nil, message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code ?? Code(status: status)
        self.message = message
        self.headers = headers
    }

    /// The answer to a body that does not decode: the error's code and message, with `status`.
    public init(_ error: FormatsError, status: HTTPResponse.Status = .badRequest) {
        self.init(status, code: Code(rawValue: error.code.rawValue), message: error.message)
    }

    /// The answer to a Hummingbird `HTTPError`: its status, headers and message; for one without a
    /// message (Hummingbird's router finding no route), a sentence for its status.
    init(_ error: HTTPError) {
        self.init(error.status, message: error.body ?? Self.sentence(error.status), headers: error.headers)
    }

    /// What an answer of `status` says when nothing more precise is known.
    static func sentence(_ status: HTTPResponse.Status) -> String {
        switch status.code {
        case 404: "no route for this method and path: see /openapi.json"
        default: status.reasonPhrase.lowercased()
        }
    }

    /// The body, its members always in this order (a client may compare two answers byte for byte:
    /// the uploader does, to tell a settings problem from bad records).
    public var body: [UInt8] {
        Self.body(code: code, message: message)
    }

    /// The body of an answer of `code` saying `message`.
    static func body(code: Code, message: String) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"error\":{\"code\":", to: &out)
        ByteWriting.appendJSONString(code.rawValue, to: &out)
        ByteWriting.appendStatic(",\"message\":", to: &out)
        ByteWriting.appendJSONString(message, to: &out)
        ByteWriting.appendStatic("}}", to: &out)
        return out
    }

    /// The `Content-Type` of every error body.
    static let contentType = "application/json; charset=utf-8"

    public func response(from request: Request, context: some RequestContext) throws -> Response { response }

    /// The answer: the status, the body, `Content-Type` and the other headers.
    var response: Response {
        var fields: HTTPFields = [.contentType: Self.contentType]
        fields.append(contentsOf: headers.filter { $0.name != .contentType })
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// The answer as bytes on the wire, for a handler that writes before Hummingbird's (the connection
    /// cap, the head guard): the status line, the headers given, `Content-Type`, `Content-Length` and
    /// `Connection: close`.
    func wire(headers extra: [(String, String)] = []) -> [UInt8] {
        let bytes = body
        var head = "HTTP/1.1 \(status.code) \(status.reasonPhrase)\r\n"
        for (name, value) in extra { head += "\(name): \(value)\r\n" }
        head += "Content-Type: \(Self.contentType)\r\nContent-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + bytes
    }
}

/// Turns every refusal into an ``ErrorAnswer``: Hummingbird's `HTTPError`s with a message keep
/// their status and message and gain a code; any other error (a store that fails) is answered 500
/// with a generic message, and its cause logged at error level (its type and description: the
/// stores' errors hold no coordinates).
struct ErrorAnswerMiddleware: RouterMiddleware {
    typealias Context = ServerContext
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as HTTPError {
            throw ErrorAnswer(error)
        } catch let error as any HTTPResponseError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            logger.error(
                "request failed",
                metadata: [
                    "serve.path": "\(request.uri.path)", "serve.error.type": "\(type(of: error))",
                    "serve.error": "\(error)",
                ])
            throw ErrorAnswer(.internalServerError, code: .internalError, message: ErrorAnswer.internalMessage)
        }
    }
}
