import Formats
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes
import Prometheus
import Synchronization

/// The body did not arrive within ``TrackServer/Configuration/bodyTimeout`` of the request head.
struct BodyTimeout: Error {}

/// Sent down a connection's pipeline by a handler that answers without reading the body (413,
/// 503): close the connection once the answer is written and the body has been read, or after
/// ``BodyTimeoutHandler/linger`` (closing with the body unread would reset the connection, and
/// the client could lose the answer).
struct CloseAfterAnswer {}

/// Gives each request's body `timeout` to arrive, from the end of its head: past it the request's
/// body fails with ``BodyTimeout`` (answered 408), and the connection closes once that answer is
/// written. Also closes connections marked ``CloseAfterAnswer``.
final class BodyTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a refused body is read and thrown away before the connection closes anyway.
    static let linger: TimeAmount = .seconds(2)

    let timeout: TimeAmount
    var timer: Scheduled<Void>?
    /// The request's body has been read to its end.
    var bodyDone = true
    /// The answer has been written.
    var answered = false
    var timedOut = false
    var closeAfterAnswer = false

    init(timeout: TimeAmount) { self.timeout = timeout }

    func schedule(_ context: ChannelHandlerContext, in delay: TimeAmount) {
        timer?.cancel()
        let loopContext = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopContext.value
            handler.timer = nil
            if handler.answered {
                context.close(promise: nil)
            } else {
                handler.timedOut = true
                context.fireErrorCaught(BodyTimeout())
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            bodyDone = false
            answered = false
            timedOut = false
            closeAfterAnswer = false
            schedule(context, in: timeout)
        case .body:
            break
        case .end:
            timer?.cancel()
            timer = nil
            bodyDone = true
            if answered && closeAfterAnswer {
                context.close(promise: nil)
                return
            }
        }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is CloseAfterAnswer else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        closeAfterAnswer = true
        if !bodyDone { schedule(context, in: Self.linger) }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        answered = true
        if timedOut || (closeAfterAnswer && bodyDone) {
            context.writeAndFlush(data, promise: promise)
            context.close(promise: nil)
            return
        }
        context.write(data, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}

/// The bytes of request bodies held in memory at once: a request reserves its declared length
/// (the largest body when it declares none) before its body is read, and what a gzip body says it
/// inflates to before inflating; past the budget it gets a 503 instead of waiting.
final class BodyBudget: Sendable {
    let capacity: Int
    let reserved = Mutex(0)
    let refusals: Prometheus.Counter

    init(capacity: Int, refusals: Prometheus.Counter) {
        self.capacity = capacity
        self.refusals = refusals
    }

    func reserve(_ bytes: Int) -> Bool {
        let ok = reserved.withLock { r in
            guard r + bytes <= capacity else { return false }
            r += bytes
            return true
        }
        if !ok { refusals.increment() }
        return ok
    }

    func release(_ bytes: Int) { reserved.withLock { $0 -= bytes } }

    var inUse: Int { reserved.withLock { $0 } }
}

/// Reads a request's body for a route: inflated when gzip, within the size limit and the bodies'
/// budget (``BodyBudget``), in the body timeout.
struct BodyReader: Sendable {
    /// The largest body, after decompression.
    let limit: Int
    /// How long the body may take (said in the 408's message).
    let timeout: Duration
    let budget: BodyBudget
    /// Counts the requests with a gzip body.
    let gzipRequests: Prometheus.Counter

    /// The body, inflated when gzip.
    ///
    /// - Throws: 413 over the limit (the connection closed after the answer), 408 past the timeout,
    ///   503 over the budget, 400 for a gzip body that does not inflate, 415 for a content coding
    ///   other than gzip (`x-gzip`) or none.
    func read(_ request: Request, _ context: ServerContext) async throws -> [UInt8] {
        // gzip (or its old name x-gzip, RFC 9110 8.4.1.3) or none: another coding would be read as
        // if it were the body itself.
        let coding = request.headers[.contentEncoding].map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let gzip = coding == "gzip" || coding == "x-gzip"
        if let coding, !gzip, !coding.isEmpty, coding != "identity" {
            context.closeAfterAnswer()
            throw HTTPError(
                .unsupportedMediaType, headers: [.acceptEncoding: "gzip"],
                message: "Content-Encoding \(coding.prefix(40)) is not accepted: send the body as it is, or gzip")
        }
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        if let declared, declared > limit {
            context.closeAfterAnswer()
            throw HTTPError(.contentTooLarge, message: "the body is larger than \(limit) bytes")
        }
        let reservation = declared ?? limit
        guard budget.reserve(reservation) else { throw busy(context) }
        defer { budget.release(reservation) }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            context.closeAfterAnswer()
            throw HTTPError(.contentTooLarge, message: "the body is larger than \(limit) bytes")
        } catch is BodyTimeout {
            throw HTTPError(.requestTimeout, message: "the body did not arrive within \(timeout)")
        }
        let bytes = Array(buffer: buffer)
        if gzip {
            gzipRequests.increment()
            // What it says it inflates to (ISIZE, the trailer's last 4 bytes), within the limit:
            // inflating stops at the limit whatever it says.
            let inflated =
                bytes.count >= 18
                ? min(limit, bytes.suffix(4).reversed().reduce(0) { $0 << 8 | Int($1) }) : limit
            guard budget.reserve(inflated) else { throw busy(context) }
            defer { budget.release(inflated) }
            do {
                return try Gzip.decompress(bytes, limit: limit)
            } catch {
                throw ErrorAnswer(error, status: error.code == .tooLarge ? .contentTooLarge : .badRequest)
            }
        }
        return bytes
    }

    /// The answer when the bodies in flight would go over their budget (the body is not read).
    func busy(_ context: ServerContext) -> HTTPError {
        context.closeAfterAnswer()
        return HTTPError(
            .serviceUnavailable, headers: [.retryAfter: "1", .contentType: "application/json"],
            message: "the server is receiving too many large bodies at once; try again shortly")
    }
}
