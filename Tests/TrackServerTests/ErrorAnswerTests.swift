import Formats
import Foundation
import GRDB
import Testing
import TrackServer
import TrackServerTesting

/// The server's refusals: one body shape, `{"error":{"code":...,"message":...}}`, a stable code,
/// and never Swift's description of an error.
@Suite("TrackServer: error answers", .serialized)
struct ErrorAnswerTests {
    /// `POST path` with the test token and `body`, over a fresh connection.
    func post(_ endpoint: Endpoint, _ path: String, _ body: String, method: String = "POST") async throws -> String {
        try await exchange(
            endpoint,
            "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer secret\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                + body)
    }

    /// The error object of an answer's body: its code and message.
    func errorBody(_ response: String) throws -> (code: String, message: String) {
        let object = try JSONSerialization.jsonObject(with: Data(body(response).utf8)) as? [String: Any]
        let error = try #require(object?["error"] as? [String: Any], "\(response)")
        #expect(error.count == 2, "only code and message: \(error)")
        return (try #require(error["code"] as? String), try #require(error["message"] as? String))
    }

    @Test func aMalformedBatchIs400WithTheDecodersCode() async throws {
        let endpoint = try await Endpoint.start()
        let response = try await post(endpoint, "/v1/locations", "{\"device\":\"van\",\"records\":[{\"lat\":")
        #expect(status(response) == 400)
        #expect(header("Content-Type", response)?.hasPrefix("application/json") == true)
        let error = try errorBody(response)
        #expect(error.code == "malformed-json")
        #expect(!error.message.isEmpty && !error.message.contains("FormatsError"))
        await endpoint.stop()
    }

    @Test func anUnknownDeviceIs404NotFound() async throws {
        let endpoint = try await Endpoint.start()
        let response = try await get(endpoint, "/v1/devices/nobody/trail")
        #expect(status(response) == 404)
        let error = try errorBody(response)
        #expect(error.code == "not-found")
        #expect(error.message == "no device 'nobody'")
        // The members in one order: two answers alike are the same bytes.
        #expect(body(response) == #"{"error":{"code":"not-found","message":"no device 'nobody'"}}"#)
        await endpoint.stop()
    }

    @Test func aMissingTokenIs401Unauthorized() async throws {
        let endpoint = try await Endpoint.start()
        let response = try await exchange(
            endpoint, "GET /v1/devices HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(status(response) == 401)
        #expect(try errorBody(response).code == "unauthorized")
        await endpoint.stop()
    }

    @Test func faultsThatDoNotDecodeNameTheKeyNotSwiftsDescription() async throws {
        let endpoint = try await Endpoint.start()
        let wrongType = try await post(endpoint, "/v1/faults", "{\"failRate\":\"often\"}", method: "PUT")
        #expect(status(wrongType) == 400)
        let error = try errorBody(wrongType)
        #expect(error.code == "invalid-faults")
        #expect(error.message == "faults: failRate is not a number")
        let notObject = try await post(endpoint, "/v1/faults", "[1]", method: "PUT")
        #expect(try errorBody(notObject).message == "faults: not a JSON object of faults")
        let outOfRange = try await post(endpoint, "/v1/faults", "{\"failStatus\":200}", method: "PUT")
        #expect(
            try errorBody(outOfRange) == ("invalid-faults", "faults: failStatus must be an HTTP error status (400-599)")
        )
        await endpoint.stop()
    }

    @Test func aStoreFailureIs500WithAGenericMessage() async throws {
        let endpoint = try await Endpoint.start()
        // The store breaks under the server: its table is gone. The server may be writing as it
        // starts (its first reconciliations): this connection waits for the lock as any client
        // of the file would (a hang guard, not a figure), rather than failing on "database is locked".
        var configuration = Configuration()
        configuration.busyMode = .timeout(120)
        let queue = try DatabaseQueue(path: endpoint.database, configuration: configuration)
        try await queue.write { try $0.execute(sql: "DROP TABLE points") }
        var record = walk(1, from: 1_715_679_000, device: "van")[0]
        record.sequence = 1
        let batch = String(decoding: JSONBatch.encode(device: "van", records: [record]), as: UTF8.self)
        let response = try await post(endpoint, "/v1/locations", batch)
        #expect(status(response) == 500)
        let error = try errorBody(response)
        #expect(error.code == "internal-error")
        #expect(error.message == ErrorAnswer.internalMessage)
        #expect(!body(response).contains("points") && !body(response).contains("no such table"))
        await endpoint.stop()
    }

    /// The answers written apart from the routes have the one body too: no route, the stream without
    /// an upgrade, an injected failure, a file Leaflet cannot have.
    @Test func everyRefusalHasTheOneBodyWhoeverWritesIt() async throws {
        var faults = Faults()
        faults.failNext = 1
        faults.failStatus = 502
        faults.retryAfter = 7
        let endpoint = try await Endpoint.start(faults: faults)
        let injected = try await post(endpoint, "/v1/locations", "{}")
        #expect(status(injected) == 502 && header("Retry-After", injected) == "7")
        #expect(try errorBody(injected) == ("injected-failure", "injected failure (502)"))
        let nowhere = try await get(endpoint, "/v2/nothing")
        #expect(status(nowhere) == 404)
        #expect(try errorBody(nowhere) == ("not-found", "no route for this method and path: see /openapi.json"))
        #expect(status(try await post(endpoint, "/healthz", "{}")) == 404)
        for path in ["/v1/stream", "/ws/last"] {
            let plain = try await get(endpoint, path)
            #expect(status(plain) == 426 && header("Upgrade", plain) == "websocket", "\(path)")
            #expect(
                try errorBody(plain) == ("upgrade-required", "GET \(path) is a WebSocket: ask with Upgrade: websocket"))
        }
        let strange = try await get(endpoint, "/map/leaflet/..evil")
        #expect(status(strange) == 404)
        #expect(try errorBody(strange) == ("not-found", "not a file of Leaflet's"))
        await endpoint.stop()
    }

    @Test func theAnswerOfADecodingErrorCarriesItsCodeAndMessage() {
        let answer = ErrorAnswer(
            FormatsError(.tooLarge, "the batch has more than 10 locations"), status: .contentTooLarge)
        #expect(answer.status == .contentTooLarge)
        #expect(answer.code.rawValue == "too-large")
        #expect(answer.message == "the batch has more than 10 locations")
        #expect(ErrorAnswer(.serviceUnavailable, message: "busy").code.rawValue == "service-unavailable")
    }
}
