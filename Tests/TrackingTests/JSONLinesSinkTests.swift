import Foundation
import Geo
import KeepTrackTesting
import Testing

@testable import Tracking

/// No JSON line is formatted when nobody reads standard output (issue 16: the service's unit puts it
/// on /dev/null), and every line is written when someone does.
@Suite("JSON Lines sink")
struct JSONLinesSinkTests {
    let event = TrackerEvent.source(SourceEvent(.connected, source: "gpsd 127.0.0.1:2947", message: "watching"))

    @Test func onDevNullTheSinkDiscardsWithoutFormatting() throws {
        let null = open("/dev/null", O_WRONLY)
        defer { close(null) }
        let sink = JSONLinesSink(fd: null)
        #expect(sink.discards)
        try sink.receive(event)
        try sink.flush()
    }

    @Test func onAPipeOrAFileEveryLineIsWritten() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let sink = JSONLinesSink(fd: fds[1])
        #expect(!sink.discards)
        try sink.receive(event)
        close(fds[1])
        let text = String(decoding: FileHandle(fileDescriptor: fds[0]).readDataToEndOfFile(), as: UTF8.self)
        #expect(text.hasPrefix("{\"event\":\"source\",\"kind\":\"connected\""))

        let path = temporaryDirectory("kt-sink") + "/events.jsonl"
        let file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(file); unlink(path) }
        #expect(!JSONLinesSink(fd: file).discards)
        #expect(!JSONLinesSink.isDevNull(-1))
    }
}
