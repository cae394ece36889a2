import NIOCore
import NIOHTTP1

/// Tells the ``ConnectionGate`` what a connection is doing: a complete request head read (busy), the
/// end of an answer written (idle once every request is answered), a `101 Switching Protocols`
/// written (upgraded: a WebSocket is not an idle HTTP connection). It sits right after the HTTP/1
/// request decoder, in the plain pipeline and in an upgradable one alike (where the handlers after
/// the decoder are only added once a request is known not to upgrade), and passes everything on
/// unchanged: after an upgrade it sees bytes, which it ignores.
final class ConnectionActivityHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Any
    typealias InboundOut = Any
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    let id: ConnectionShedder.ID
    let gate: ConnectionGate

    init(id: ConnectionShedder.ID, gate: ConnectionGate) {
        self.id = id
        self.gate = gate
    }

    /// Adds one to `channel`'s pipeline after its HTTP/1 request decoder; a pipeline without one
    /// (not HTTP/1) is exempt from shedding and the first-request timeout, as an upgraded one is.
    static func add(to channel: any Channel, id: ConnectionShedder.ID, gate: ConnectionGate) {
        let pipeline = channel.pipeline.syncOperations
        guard let decoder = try? pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self),
            (try? pipeline.addHandler(ConnectionActivityHandler(id: id, gate: gate), position: .after(decoder)))
                != nil
        else {
            gate.upgraded(id)
            return
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let part = unwrapInboundIn(data) as? HTTPServerRequestPart, case .head = part {
            gate.requestHead(id)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if let part = unwrapOutboundIn(data) as? HTTPServerResponsePart {
            switch part {
            case .head(let head) where head.status == .switchingProtocols: gate.leftForStream(id)
            case .end: gate.answered(id)
            case .head, .body: break
            }
        }
        context.write(data, promise: promise)
    }
}
