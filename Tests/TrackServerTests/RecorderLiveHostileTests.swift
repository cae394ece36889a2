import Foundation
import HummingbirdWSClient
import KeepTrackTesting
import Logging
import NIOCore
import Testing
import TrackServer
import TrackServerTesting

/// Issue 28, item 3: what a hostile client of `/ws/last` can send (its only input is the text it
/// sends after the upgrade, which the live stream's upgrade tests cover).
@Suite("Endpoint: hostile clients of /ws/last", .serialized)
struct RecorderLiveHostileTests {
    /// A message past 16 KiB closes that client alone; `LAST` in a binary frame, `LAST` split
    /// across fragments' garbage and other texts are not answered; a reading client is served on.
    @Test func aHugeMessageClosesThatClientAloneAndOtherMessagesAreIgnored() async throws {
        let endpoint = try await Endpoint.start()
        let raw = Raw(endpoint: endpoint)
        var clients: [RecorderLiveClient] = []
        do {
            #expect(try await raw.send(.GET, "/?id=van1&lat=48.2&lon=11.6&timestamp=1715679000").status == 200)
            let url = "ws://127.0.0.1:\(endpoint.port)/ws/last?token=secret"
            let huge = Task {
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: 1 << 20), logger: Logger(label: "test.hostile")
                ) { inbound, outbound, _ in
                    try await outbound.write(.text(String(repeating: "L", count: 20_000)))
                    for try await _ in inbound {}
                }
            }
            // Ends (the server closes it) rather than hanging: the result, whatever the close code.
            _ = try? await withTimeout(30, "the huge message's client to be closed") { try await huge.value }
            // The odd messages first, then LAST: one answer (the latest, 1715679000), then the point
            // stored after it (1715679100); an odd message answered would have come before.
            let odd = try await withTimeout(30, "the odd client's frames") {
                try await WebSocketClient.connect(
                    url: url, configuration: .init(maxFrameSize: 1 << 20), logger: Logger(label: "test.hostile")
                ) { inbound, outbound, _ in
                    try await outbound.write(.binary(ByteBuffer(string: "LAST")))
                    try await outbound.write(.text("last"))
                    try await outbound.write(.text("LAST "))
                    try await outbound.write(.text(""))
                    try await outbound.write(.text("LAST"))
                    var seen: [String] = []
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        guard case .text(let text) = message else { continue }
                        seen.append(text)
                        if seen.count == 1 {
                            _ = try await raw.send(.GET, "/?id=van1&lat=48.2&lon=11.6&timestamp=1715679100")
                        } else {
                            break
                        }
                    }
                    #expect(seen.count == 2 && seen[0].contains("1715679000") && seen[1].contains("1715679100"))
                    try await outbound.close(.normalClosure, reason: nil)
                }
            }
            _ = odd
            // A reading client is served on.
            let reading = RecorderLiveClient(url)
            clients.append(reading)
            #expect(try await reading.next()["tst"] as? Int == 1_715_679_100)
        } catch {
            Issue.record(error)
        }
        for client in clients { client.stop() }
        await raw.close()
        await endpoint.stop()
    }
}
