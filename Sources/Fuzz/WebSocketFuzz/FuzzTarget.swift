import Dispatch
import HTTPTypes
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Synchronization

// The bytes a client sends on `keeptrack serve`'s WebSocket routes after the upgrade, two ways:
//
// 1. swift-nio's frame decoder as the upgrade installs it (WebSocketFrameEncoder,
//    WebSocketFrameDecoder(maxFrameSize: 16 KiB), WebSocketProtocolErrorHandler) on an EmbeddedChannel:
//    the same frames and the same answer whether the bytes come whole, in two pieces or byte by byte;
//    the frames and the refusal (1009 for a frame over 16 KiB, 1002 for a fragmented or long control
//    frame) are the ones ClientFrames reads independently; every frame re-encoded decodes the same.
// 2. Hummingbird's HTTP1WebSocketUpgradeChannel configured as TrackServer.httpChannel configures it
//    (maxFrameSize 16 KiB, auto ping), upgraded by a real request on a NIOAsyncTestingChannel, with
//    /ws/last's reading loop (messages of at most 16 KiB; a text `LAST` is answered): the server
//    writes exactly the unmasked frames ServerAnswer expects (a pong per ping, an answer per `LAST`
//    however fragmented, a close with a legal code on a close or a protocol error, nothing after it),
//    and closes the connection itself when it sent a close.

/// serve's limits (TrackServer+Stream.swift): the frame decoder's and the message assembly's.
let maxFrameSize = 1 << 14
let maxMessageSize = 1 << 14
/// What the harness's /ws/last answers `LAST` with (serve answers each device's latest location).
let lastAnswer = "LAST answered"
/// A ping sent after the input to know when the server has handled all of it: its pong comes last.
let sentinel = Array("keeptrack-fuzz-end".utf8)
/// The client's address on the test channels.
let peer = try! SocketAddress(ipAddress: "127.0.0.1", port: 50_000)
let logger = Logger(label: "WebSocketFuzz", factory: { _ in SwiftLogNoOpLogHandler() })

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let reference = ClientFrames(bytes, maxFrameSize: maxFrameSize)
    checkDecoder(bytes, reference: reference)
    let done = DispatchSemaphore(value: 0)
    Task {
        await checkPipeline(bytes, reference: reference)
        done.signal()
    }
    done.wait()
    return 0
}

// MARK: - The frame decoder

/// What the decoder pipeline makes of some pieces of input: frames, the error, the bytes written back.
struct Decoded: Equatable {
    var frames: [WebSocketFrame] = []
    var error: NIOWebSocketError?
    var written: [UInt8] = []
    var closed = false
}

func decode(_ pieces: [ArraySlice<UInt8>]) -> Decoded {
    let channel = EmbeddedChannel()
    try! channel.pipeline.syncOperations.addHandlers(
        WebSocketFrameEncoder(), ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: maxFrameSize)),
        WebSocketProtocolErrorHandler())
    try! channel.connect(to: peer).wait()
    var out = Decoded()
    for piece in pieces {
        do {
            try channel.writeInbound(ByteBuffer(bytes: piece))
        } catch let error as NIOWebSocketError {
            out.error = error
            break
        } catch {
            preconditionFailure("the decoder failed with \(error)")
        }
    }
    while let frame = try! channel.readInbound(as: WebSocketFrame.self) { out.frames.append(frame) }
    while let buffer = try! channel.readOutbound(as: ByteBuffer.self) { out.written += buffer.readableBytesView }
    out.closed = !channel.isActive
    // A close tears the pipeline down on the loop's next run: without it, channel and pipeline leak.
    channel.embeddedEventLoop.run()
    _ = try? channel.finish()
    return out
}

func checkDecoder(_ bytes: [UInt8], reference: ClientFrames) {
    let whole = decode([bytes[...]])
    let cut = bytes.isEmpty ? 0 : Int(bytes.reduce(UInt32(0)) { $0 &* 31 &+ UInt32($1) } % UInt32(bytes.count))
    precondition(decode([bytes[..<cut], bytes[cut...]]) == whole, "two pieces (cut at \(cut)) decode otherwise")
    precondition(decode(bytes.indices.map { bytes[$0...$0] }) == whole, "byte by byte decodes otherwise")

    // The same frames, and the same refusal, as read independently.
    precondition(whole.frames.count == reference.frames.count, "not the frames RFC 6455 reads")
    for (frame, expected) in zip(whole.frames, reference.frames) {
        precondition(
            frame.fin == expected.fin && frame.opcode == WebSocketOpcode(encodedWebSocketOpcode: expected.opcode))
        let reserved: UInt8 = (frame.rsv1 ? 4 : 0) | (frame.rsv2 ? 2 : 0) | (frame.rsv3 ? 1 : 0)
        precondition(reserved == expected.reserved, "other reserved bits")
        precondition(frame.maskKey.map { Array($0) } == expected.maskKey, "another mask key")
        precondition(Array(frame.unmaskedData.readableBytesView) == expected.payload, "another payload")
        precondition(frame.length <= maxFrameSize, "a frame over the limit")
    }
    switch reference.end {
    case .refused(let code):
        precondition(whole.error.map(closeCode) == code, "refused otherwise: \(String(describing: whole.error))")
        precondition(whole.closed, "a refused input leaves the connection open")
        precondition(
            ServerFrame.all(in: whole.written) == [
                ServerFrame(
                    fin: true, reserved: 0, opcode: 8, masked: false, payload: [UInt8(code >> 8), UInt8(code & 0xFF)])
            ], "not one close frame with the code")
    case .boundary, .partial:
        precondition(whole.error == nil && whole.written.isEmpty && !whole.closed, "an acceptable input refused")
    }

    // Re-encoded (the same mask key), the frames decode the same.
    guard !whole.frames.isEmpty else { return }
    let encoder = EmbeddedChannel(handler: WebSocketFrameEncoder())
    var encoded: [UInt8] = []
    for frame in whole.frames {
        // A decoded frame's data is as sent (masked); the encoder masks the data it is given.
        var plain = frame
        plain.data = frame.unmaskedData
        try! encoder.writeOutbound(plain)
    }
    while let buffer = try! encoder.readOutbound(as: ByteBuffer.self) { encoded += buffer.readableBytesView }
    _ = try? encoder.finish()
    let again = decode([encoded[...]])
    precondition(again.error == nil && again.frames == whole.frames, "decode → encode → decode changed the frames")
}

/// The close code WebSocketProtocolErrorHandler answers a decoder's error with.
func closeCode(_ error: NIOWebSocketError) -> UInt16 {
    switch error {
    case .invalidFrameLength: 1009
    case .fragmentedControlFrame, .multiByteControlFrameLength: 1002
    }
}

// MARK: - Hummingbird's upgraded connection

/// An upgrade request for /ws/last, as a browser sends it.
let upgradeRequest = Array(
    ("GET /ws/last HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)

/// The connection channel as TrackServer.httpChannel builds it (without its head guard, which has left
/// the pipeline by the time frames arrive), with /ws/last's reading loop as its handler.
func upgradeChannel(_ started: Flag) -> HTTP1WebSocketUpgradeChannel {
    let ws = WebSocketServerConfiguration(maxFrameSize: maxFrameSize, autoPing: .enabled(timePeriod: .seconds(30)))
    return HTTP1WebSocketUpgradeChannel(responder: { _, _, _ in }, configuration: .init(http1: .init(), ws: ws)) {
        head, _, _ in
        guard head.path == "/ws/last" else { return .dontUpgrade }
        return .upgrade([:]) { inbound, outbound, _ in
            started.set()
            for try await message in inbound.messages(maxSize: maxMessageSize) {
                guard case .text(let text) = message, text == "LAST" else { continue }
                try await outbound.write(.custom(.init(fin: true, opcode: .text, data: ByteBuffer(string: lastAnswer))))
            }
        }
    }
}

/// The bytes written so far, without waiting.
func drain(_ channel: NIOAsyncTestingChannel, into written: inout [UInt8]) async {
    while let data = try? await channel.readOutbound(as: IOData.self) {
        guard case .byteBuffer(let buffer) = data else { preconditionFailure("a file region written") }
        written += buffer.readableBytesView
    }
}

/// The frames after the 101 response in `written`, which must be well-formed server frames; `nil`
/// while the response head or the last frame is not whole yet.
func answersSoFar(_ written: [UInt8]) -> [ServerAnswer]? {
    let head = Array("HTTP/1.1 101 Switching Protocols\r\n".utf8)
    precondition(head.starts(with: written.prefix(head.count)), "not a 101 response")
    guard written.count >= 4,
        let end = (0...(written.count - 4)).first(where: { written[$0..<($0 + 4)].elementsEqual([13, 10, 13, 10]) })
    else { return nil }
    guard let frames = ServerFrame.all(in: Array(written[(end + 4)...])) else { return nil }
    return frames.map { frame in
        guard let answer = frame.answer else { preconditionFailure("a malformed server frame: \(frame)") }
        return answer
    }
}

/// The frames after the 101 response in `written`, which must be whole, well-formed server frames.
func answers(_ written: [UInt8]) -> [ServerAnswer] {
    guard let answers = answersSoFar(written) else {
        preconditionFailure("the server wrote something that is not whole WebSocket frames")
    }
    return answers
}

/// A flag set once, from any thread.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Runs the test loop until `done`: what the channel's handlers schedule on their own loop runs only
/// when the loop is run (from the handler's tasks, or here).
func settle(_ channel: NIOAsyncTestingChannel, until done: () async -> Bool) async {
    while await !done() {
        await channel.testingEventLoop.run()
        await Task.yield()
    }
}

func checkPipeline(_ bytes: [UInt8], reference: ClientFrames) async {
    let channel = NIOAsyncTestingChannel()
    let started = Flag()
    let handled = Flag()
    let base = upgradeChannel(started)
    let value = try! await channel.eventLoop.flatSubmit { base.setup(channel: channel, logger: logger) }.get()
    try! await channel.connect(to: peer).get()
    Task {
        await base.handle(value: value, logger: logger)
        handled.set()
    }
    try! await channel.writeInbound(ByteBuffer(bytes: upgradeRequest))
    await settle(channel) { started.isSet }

    var written: [UInt8] = []
    _ = try? await channel.writeInbound(ByteBuffer(bytes: bytes))
    switch reference.end {
    case .refused(let code):
        // Decoded at once, on the event loop: closed before anything the handler would answer.
        precondition(!channel.isActive, "a refused input leaves the connection open")
        await settle(channel) { handled.isSet }
        await drain(channel, into: &written)
        precondition(answers(written) == [.close(code)], "refused without the close \(code)")
        return
    case .boundary, .partial:
        break
    }
    let expected = ServerAnswer.expected(to: reference.frames, maxMessageSize: maxMessageSize)
    if case .close = expected.last {
        // The server closes by itself.
        await settle(channel) { handled.isSet }
        await drain(channel, into: &written)
        precondition(answers(written) == expected, "answered \(answers(written)), not \(expected)")
    } else if reference.end == .boundary {
        // A ping after the input: its pong comes once the server has handled everything before it.
        var ping = [0x89, 0x80 | UInt8(sentinel.count), 0, 0, 0, 0]
        ping += sentinel
        try! await channel.writeInbound(ByteBuffer(bytes: ping))
        await settle(channel) {
            await drain(channel, into: &written)
            if answersSoFar(written)?.contains(.pong(sentinel)) == true { return true }
            precondition(!handled.isSet, "closed without answering the final ping: \(answersSoFar(written) ?? [])")
            return false
        }
        precondition(channel.isActive, "closed without a close frame")
        precondition(answers(written) == expected + [.pong(sentinel)], "answered \(answers(written)), not \(expected)")
        _ = try? await channel.close()
        await settle(channel) { handled.isSet }
    } else {
        // The client's end within a frame: handled up to where it caught the server, not closed by it.
        _ = try? await channel.close()
        await settle(channel) { handled.isSet }
        await drain(channel, into: &written)
        let got = answers(written)
        precondition(expected.starts(with: got), "answered \(got), not a beginning of \(expected)")
    }
}

// MARK: - RFC 6455's framing, read independently

/// What a client's bytes after the upgrade are, by RFC 6455's framing (section 5.2) with the limits
/// `serve` sets: written apart from swift-nio's `WebSocketFrameDecoder`, so that the two can be compared.
struct ClientFrames: Equatable {
    /// One frame, its payload unmasked.
    struct Frame: Equatable {
        var fin: Bool
        /// RSV1, RSV2, RSV3 as the three bits under FIN (0 to 7).
        var reserved: UInt8
        var opcode: UInt8
        var maskKey: [UInt8]?
        var payload: [UInt8]

        var isControl: Bool { opcode & 0x08 != 0 }
    }

    /// How the bytes end.
    enum End: Equatable {
        /// After a whole frame (or no byte at all).
        case boundary
        /// Inside a frame whose header is acceptable so far.
        case partial
        /// At a header the decoder refuses, with the close code it answers (1002, 1009).
        case refused(UInt16)
    }

    var frames: [Frame] = []
    var end = End.boundary

    /// Splits `bytes` into frames, as far as they go. A header is judged as soon as its length is
    /// known (before its mask and payload arrive): longer than `maxFrameSize` is 1009; a control frame
    /// without FIN, or longer than 125 bytes, is 1002.
    init(_ bytes: [UInt8], maxFrameSize: Int) {
        var at = 0
        while at < bytes.count {
            let first = bytes[at]
            guard at + 1 < bytes.count else {
                end = .partial
                return
            }
            let second = bytes[at + 1]
            var i = at + 2
            var length = Int(second & 0x7F)
            if length >= 126 {
                let width = length == 126 ? 2 : 8
                guard i + width <= bytes.count else {
                    end = .partial
                    return
                }
                var wide: UInt64 = 0
                for b in bytes[i..<(i + width)] { wide = wide << 8 | UInt64(b) }
                i += width
                guard wide <= UInt64(maxFrameSize) else {
                    end = .refused(1009)
                    return
                }
                length = Int(wide)
            } else if length > maxFrameSize {
                end = .refused(1009)
                return
            }
            let control = first & 0x08 != 0
            if control && first & 0x80 == 0 || control && length > 125 {
                end = .refused(1002)
                return
            }
            var key: [UInt8]?
            if second & 0x80 != 0 {
                guard i + 4 <= bytes.count else {
                    end = .partial
                    return
                }
                key = Array(bytes[i..<(i + 4)])
                i += 4
            }
            guard i + length <= bytes.count else {
                end = .partial
                return
            }
            var payload = Array(bytes[i..<(i + length)])
            if let key {
                for j in payload.indices { payload[j] ^= key[j % 4] }
            }
            frames.append(
                Frame(
                    fin: first & 0x80 != 0, reserved: (first >> 4) & 0x07, opcode: first & 0x0F, maskKey: key,
                    payload: payload))
            at = i + length
        }
        end = .boundary
    }
}

/// What the server writes back to a client's frames, up to its close frame: serve's `/ws/last` as
/// Hummingbird's WebSocket handler runs it (WSCore: pings answered, messages assembled up to
/// `maxMessageSize`, a close answered, a protocol error closed with its code).
enum ServerAnswer: Equatable {
    case pong([UInt8])
    /// The answer to a text message `LAST`.
    case last
    case close(UInt16)

    /// The frames the server answers `frames` with, and whether it closes (its last answer is then
    /// `.close`). Nothing comes after a close.
    static func expected(to frames: [ClientFrames.Frame], maxMessageSize: Int) -> [ServerAnswer] {
        var answers: [ServerAnswer] = []
        // The message being assembled: its opcode and bytes so far.
        var message: (opcode: UInt8, bytes: [UInt8])?
        for frame in frames {
            switch frame.opcode {
            case 0x8:
                guard frame.reserved == 0 else { return answers + [.close(1002)] }
                return answers + [.close(closeAnswer(frame.payload))]
            case 0x9:
                answers.append(.pong(frame.payload))
            case 0xA:
                continue
            case 0x0, 0x1, 0x2:
                guard frame.reserved == 0 else { return answers + [.close(1002)] }
                if frame.opcode == 0 {
                    guard var m = message else { return answers + [.close(1002)] }
                    guard m.bytes.count + frame.payload.count <= maxMessageSize else {
                        return answers + [.close(1009)]
                    }
                    m.bytes += frame.payload
                    message = m
                } else {
                    guard message == nil else { return answers + [.close(1002)] }
                    message = (frame.opcode, frame.payload)
                }
                if frame.fin, let m = message {
                    if m.opcode == 0x1 && m.bytes == Array("LAST".utf8) { answers.append(.last) }
                    message = nil
                }
            default:
                // A reserved opcode.
                return answers + [.close(1002)]
            }
        }
        return answers
    }

    /// The code a close frame is answered with: 1000, or 1002 for a body of one byte or a code that
    /// RFC 6455 (section 7.4) does not let a peer send.
    static func closeAnswer(_ payload: [UInt8]) -> UInt16 {
        if payload.isEmpty { return 1000 }
        guard payload.count >= 2 else { return 1002 }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        let named: Set<UInt16> = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011]
        return named.contains(code) || (3000...4999).contains(code) ? 1000 : 1002
    }
}

/// A server frame as read back from the bytes the server wrote.
struct ServerFrame: Equatable {
    var fin: Bool
    var reserved: UInt8
    var opcode: UInt8
    var masked: Bool
    var payload: [UInt8]

    /// The frames in `bytes`, which must hold whole frames and nothing else; `nil` when they do not.
    static func all(in bytes: [UInt8]) -> [ServerFrame]? {
        let parsed = ClientFrames(bytes, maxFrameSize: 1 << 20)
        guard parsed.end == .boundary else { return nil }
        return parsed.frames.map {
            ServerFrame(
                fin: $0.fin, reserved: $0.reserved, opcode: $0.opcode, masked: $0.maskKey != nil, payload: $0.payload)
        }
    }

    /// What this frame answers, if it is a well-formed server frame (unmasked, no reserved bit, a
    /// close with a code a server may send).
    var answer: ServerAnswer? {
        guard !masked, reserved == 0 else { return nil }
        switch opcode {
        case 0x1 where fin && payload == Array(lastAnswer.utf8): return .last
        case 0x8 where payload.count >= 2:
            let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
            let legal: Set<UInt16> = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1011]
            return legal.contains(code) ? .close(code) : nil
        case 0xA where fin: return .pong(payload)
        default: return nil
        }
    }
}
