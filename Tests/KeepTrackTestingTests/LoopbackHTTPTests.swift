import Foundation
import Testing

@testable import KeepTrackTesting

/// The loopback HTTP client Home Assistant's harness talks through: answers framed by length, by
/// chunks or by the connection's end, and a refused connection said as such.
@Suite("Test support: the loopback HTTP client")
struct LoopbackHTTPTests {
    @Test func readsAnAnswerByItsLengthItsChunksOrItsEnd() throws {
        let sized = try LoopbackHTTP.parse(
            Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n[]trailing".utf8),
            what: "t")
        #expect(sized.status == 200 && sized.text == "[]" && sized.headers["content-type"] == "application/json")
        let chunked = try LoopbackHTTP.parse(
            Array(
                "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n"
                    .utf8),
            what: "t")
        #expect(chunked.status == 201 && chunked.text == #"{"a":1}"#)
        #expect((chunked.json as? [String: Int])?["a"] == 1)
        let closed = try LoopbackHTTP.parse(Array("HTTP/1.0 404 Not Found\r\n\r\n404: Not Found".utf8), what: "t")
        #expect(closed.status == 404 && closed.text == "404: Not Found")
        #expect(throws: LoopbackHTTP.Failure.self) { try LoopbackHTTP.parse(Array("HTTP/1.1 200".utf8), what: "t") }
    }

    @Test func aRefusedConnectionIsNamed() throws {
        let port = try ReservedPort()
        #expect {
            try LoopbackHTTP.request("GET", port: port.number, path: "/")
        } throws: { error in
            "\(error)".contains("connect to 127.0.0.1:\(port.number)")
        }
    }
}
