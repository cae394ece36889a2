import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore

/// The HTTP/1 channel with the stream's upgrade (``LiveStream/channel(_:_:)``), and a guard on
/// each connection's first request head, which the upgrade's parser reads before Hummingbird's own
/// limits apply: the head must be complete within the idle timeout (or the connection is closed) and
/// within ``HeadGuardHandler/maxHeadBytes`` (or it is answered 400 and closed).
struct StreamUpgradableChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value

    let base: HTTP1WebSocketUpgradeChannel
    let idleTimeout: TimeAmount?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(HeadGuardHandler(timeout: idleTimeout))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async { await base.handle(value: value, logger: logger) }
}

/// Watches a connection's bytes until the end of its first request head (CR LF CR LF), then leaves
/// the pipeline. Closes the connection when the head takes longer than `timeout`; answers 400
/// (``ErrorAnswer``'s body) and closes when it is longer than ``maxHeadBytes``.
final class HeadGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The longest first head: what the HTTP parser refuses beyond (80 KiB) is refused here first.
    static let maxHeadBytes = 64 << 10

    let timeout: TimeAmount?
    var timer: Scheduled<Void>?
    var seen = 0
    /// The last bytes read, for a CR LF CR LF split across reads.
    var tail: [UInt8] = []
    var done = false

    init(timeout: TimeAmount?) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        guard let timeout else { return }
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) { loopContext.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return context.fireChannelRead(data) }
        let buffer = unwrapInboundIn(data)
        let bytes = tail + buffer.readableBytesView
        if let end = Self.headEnd(bytes) {
            done = true
            timer?.cancel()
            if seen + end - tail.count > Self.maxHeadBytes { return refuse(context) }
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        seen += buffer.readableBytes
        if seen > Self.maxHeadBytes { return refuse(context) }
        tail = Array(bytes.suffix(3))
        context.fireChannelRead(data)
    }

    /// Where CR LF CR LF ends in `bytes`, if it is there.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13
        {
            return i + 1
        }
        return nil
    }

    func refuse(_ context: ChannelHandlerContext) {
        done = true
        let answer = ErrorAnswer(.badRequest, message: "the request head is longer than \(Self.maxHeadBytes) bytes")
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: answer.wire())), promise: nil)
        context.close(mode: .output, promise: nil)
        let loopContext = NIOLoopBound(context, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: .seconds(2)) { loopContext.value.close(promise: nil) }
    }
}

/// Drops every write after it is added, at the front of a connection's pipeline: what Hummingbird
/// answers a declined upgrade with, after ``LiveStream/challengeNow(_:)`` answered it.
final class DiscardWrites: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        promise?.succeed(())
    }
}
