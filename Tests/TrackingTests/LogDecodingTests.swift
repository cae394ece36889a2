import Formats
import Foundation
import KeepTrackTesting
import NMEA
import Testing

@testable import Tracking

/// `keeptrack decode` as a library call, in-process.
@Suite("Log decoding")
struct LogDecodingTests {
    func decode(_ text: String, format: FixFormat = .jsonl, strict: Bool = false, maxWarnings: Int = 20)
        throws -> (output: String, result: LogDecoding.Result, warnings: [LogDecoding.Warning])
    {
        let dir = try TemporaryDirectory("kt-decode").url
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let input = dir.appendingPathComponent("in.nmea").path
        let output = dir.appendingPathComponent("out").path
        try text.write(toFile: input, atomically: true, encoding: .utf8)
        let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd) }
        var job = LogDecoding(path: input, format: format, options: .init(strict: strict))
        job.maxWarnings = maxWarnings
        let warnings = Warnings()
        let result = try job.run(output: OutputBuffer(fd: fd), warn: { warnings.append($0) })
        return (try String(contentsOfFile: output, encoding: .utf8), result, warnings.all)
    }

    final class Warnings: @unchecked Sendable {
        var all: [LogDecoding.Warning] = []
        func append(_ w: LogDecoding.Warning) { all.append(w) }
    }

    @Test func aFixtureDecodesToOneLinePerPositionFix() throws {
        let text = try String(contentsOfFile: fixturePath("walk-15min.nmea"), encoding: .utf8)
        let (output, result, warnings) = try decode(text)
        let lines = output.split(separator: "\n")
        #expect(lines.count == result.statistics.positionFixes)
        #expect(lines.count > 800)
        #expect(lines.allSatisfy { $0.hasPrefix("{\"time\":") })
        #expect(warnings.isEmpty)
        #expect(result.failure == nil)
        #expect(result.statistics.sentences > lines.count)
    }

    @Test func badSentencesAreWarnedUpToTheLimitThenCounted() throws {
        let good = "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\n"
        let bad = "$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*00\n"
        let (_, result, warnings) = try decode(good + String(repeating: bad, count: 5), maxWarnings: 2)
        #expect(result.statistics.badChecksums == 5)
        #expect(warnings.count == 3)
        guard case .badSentence(let first) = warnings[0] else {
            Issue.record("the first warning is not a bad sentence: \(warnings[0])")
            return
        }
        #expect(first.code == .badChecksum && first.line == 2 && first.file?.hasSuffix("in.nmea") == true)
        guard case .moreFollow = warnings[2] else {
            Issue.record("the third warning does not say more follow: \(warnings[2])")
            return
        }
        #expect(result.statistics.errors == [.badChecksum: 5])
    }

    @Test func strictStopsAtTheFirstBadSentenceAndKeepsWhatCameBefore() throws {
        let text = try String(contentsOfFile: fixturePath("walk-15min.nmea"), encoding: .utf8)
        var lines = text.split(whereSeparator: \.isNewline).map(String.init)  // CR LF is one Character
        lines[200] = "$GPGGA,garbage*00"
        let (output, result, _) = try decode(lines.joined(separator: "\r\n"), strict: true)
        #expect(result.failure != nil)
        #expect(!output.isEmpty)
        #expect(result.failure?.line == 201)
        #expect(output.split(separator: "\n").count == result.statistics.positionFixes)
        #expect(result.statistics.positionFixes < 100)
    }
}
