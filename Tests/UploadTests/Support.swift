import Formats
import Foundation
import KeepTrackTesting
import TrackServer
import Upload

/// A fresh temporary directory (each SQLite test gets its own).
func temporaryDirectory() -> String {
    var template = Array("/tmp/keeptrack-upload-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

/// A real endpoint on 127.0.0.1, on a free port, with its own database.
struct Endpoint {
    let server: TrackServer
    let task: Task<Void, any Error>
    let port: Int
    let directory: String

    static func start(token: String? = "secret", faults: Faults = Faults(),
                      configure: (inout TrackServer.Configuration) -> Void = { _ in }) async throws -> Endpoint {
        let dir = temporaryDirectory()
        var c = TrackServer.Configuration(database: dir + "/endpoint.sqlite")
        c.token = token
        c.faultInjection = true
        c.faults = faults
        configure(&c)
        let server = try TrackServer(configuration: c)
        let (ready, continuation) = AsyncStream.makeStream(of: Int.self)
        let task = Task { try await server.run { continuation.yield($0) } }
        var it = ready.makeAsyncIterator()
        let port = try await withTimeout(30, "the endpoint to listen") { [ready] in
            var it = ready.makeAsyncIterator()
            return await it.next() ?? 0
        }
        _ = it
        return Endpoint(server: server, task: task, port: port, directory: dir)
    }

    func url(_ path: String = "/v1/locations") -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() async {
        await server.shutdown()
        _ = try? await task.value
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A Prometheus counter's value from the endpoint's metrics.
    func metric(_ name: String) -> Int {
        for line in server.metricsText().split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(line.split(separator: " ").last!) ?? -1
        }
        return 0
    }
}

/// `n` locations of a walk north, one a second.
func walk(_ n: Int, from t0: Double = 1_715_679_000, device: String = "") -> [TrailRecord] {
    (0..<n).map { i in
        TrailRecord(device: device, sequence: 0, time: t0 + Double(i), latitude: 48.1 + Double(i) * 1e-5,
                    longitude: 11.5, altitude: 520, horizontalAccuracy: 5, verticalAccuracy: 8, speed: 1.2, course: 0)
    }
}
