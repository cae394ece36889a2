import Geo
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import TrackServer

/// What the pipeline tells the connection cap, fed bytes as a client sends them: a head counts once
/// complete (not byte by byte), an answer's end makes the connection idle, a `101 Switching
/// Protocols` makes it an upgraded connection that is never shed, and bytes after an upgrade pass
/// through untouched.
@Suite("ConnectionActivityHandler: the pipeline's events for the connection cap")
struct ConnectionActivityHandlerTests {
    /// An HTTP/1 server pipeline on an embedded channel, admitted by a gate of `cap` with the
    /// handler in place.
    static func pipeline(cap: Int = 4) throws -> (EmbeddedChannel, ConnectionGate, ConnectionShedder.ID) {
        let gate = ConnectionGate(
            settings: .init(cap: cap, firstRequestTimeout: .seconds(10)), clock: ManualClock(), metrics: ServerMetrics()
        )
        let channel = EmbeddedChannel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withErrorHandling: false)
        let id = try #require(gate.admit(channel))
        ConnectionActivityHandler.add(to: channel, id: id, gate: gate)
        return (channel, gate, id)
    }

    static func phase(_ gate: ConnectionGate, _ id: ConnectionShedder.ID) -> ConnectionShedder.Phase? {
        gate.state.withLock { $0.shedder.entries[id]?.phase }
    }

    @Test func aHeadSentByteByByteCountsOnceComplete() throws {
        let (channel, gate, id) = try Self.pipeline()
        let head = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a\r\n\r\n".utf8)
        for byte in head.dropLast() {
            try channel.writeInbound(channel.allocator.buffer(bytes: [byte]))
            #expect(Self.phase(gate, id) == .awaitingFirstHead)
        }
        try channel.writeInbound(channel.allocator.buffer(bytes: [head.last!]))
        #expect(Self.phase(gate, id) == .busy(requests: 1))
        guard case .head(let request) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("the head is passed on")
            return
        }
        #expect(request.uri == "/healthz")
        _ = try channel.finish()
    }

    @Test func anAnswersEndMakesTheConnectionIdleAndA101MakesItUpgraded() throws {
        let (channel, gate, id) = try Self.pipeline()
        try channel.writeInbound(channel.allocator.buffer(string: "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"))
        try channel.writeOutbound(HTTPServerResponsePart.head(.init(version: .http1_1, status: .ok)))
        #expect(Self.phase(gate, id) == .busy(requests: 1))
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        guard case .idle = Self.phase(gate, id) else {
            Issue.record("idle after the answer, not \(String(describing: Self.phase(gate, id)))")
            return
        }
        // An upgrade: the request, its 101, then the decoder goes (as NIO's upgrader removes it) and
        // WebSocket bytes flow through the handler, which lets them pass.
        try channel.writeInbound(
            channel.allocator.buffer(
                string: "GET /v1/stream HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
        try channel.writeOutbound(HTTPServerResponsePart.head(.init(version: .http1_1, status: .switchingProtocols)))
        #expect(Self.phase(gate, id) == nil, "a stream now: it left the HTTP connection cap")
        #expect(gate.served == 0)
        let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
        let removed = channel.pipeline.syncOperations.removeHandler(decoder)
        channel.embeddedEventLoop.run()
        try removed.wait()
        while try channel.readInbound(as: HTTPServerRequestPart.self) != nil {}
        let frame: [UInt8] = [0x81, 0x82, 1, 2, 3, 4, 0x69 ^ 1, 0x21 ^ 2]
        try channel.writeInbound(channel.allocator.buffer(bytes: frame))
        #expect(try channel.readInbound(as: ByteBuffer.self) == channel.allocator.buffer(bytes: frame))
        // Off the HTTP cap: a newcomer takes the place without shedding anything, and the stream's
        // close later has nothing to forget.
        let newcomer = EmbeddedChannel()
        #expect(gate.admit(newcomer) != nil)
        #expect(channel.isActive, "the stream was not shed to make room")
        _ = try channel.finish()
        #expect(gate.served == 1)
        _ = try? newcomer.finish()
    }

    @Test func aPipelineWithoutAnHTTP1DecoderIsExempt() throws {
        let gate = ConnectionGate(
            settings: .init(cap: 1, firstRequestTimeout: .seconds(10)), clock: ManualClock(), metrics: ServerMetrics())
        let channel = EmbeddedChannel()
        let id = try #require(gate.admit(channel))
        ConnectionActivityHandler.add(to: channel, id: id, gate: gate)
        #expect(Self.phase(gate, id) == .upgraded)
        #expect(gate.admit(EmbeddedChannel()) == nil, "neither shed nor timed out: a newcomer is refused")
        _ = try channel.finish()
    }

    @Test func aNewcomerAtTheCapClosesTheConnectionWithoutAHead() throws {
        let (silent, gate, _) = try Self.pipeline(cap: 1)
        let newcomer = EmbeddedChannel()
        #expect(gate.admit(newcomer) != nil)
        #expect(!silent.isActive, "the silent connection was closed to make room")
        #expect(gate.served == 1)
        _ = try? newcomer.finish()
    }
}
