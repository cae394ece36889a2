import Foundation
import Testing

@Suite("keeptrack replay and track")
struct SourceCommandTests {
    @Test func replayPrintsTheSameFixesAsDecodeAndSourceEvents() throws {
        let replay = try keeptrack(["replay", "fixtures/walk-15min.nmea"])
        let decode = try keeptrack(["decode", "fixtures/walk-15min.nmea"])
        #expect(replay.status == 0)
        let lines = replay.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("{\"event\":\"source\",\"kind\":\"connected\"") == true)
        #expect(lines.last?.hasPrefix("{\"event\":\"source\",\"kind\":\"endOfInput\"") == true)
        #expect(lines.dropFirst().dropLast().joined(separator: "\n") + "\n" == decode.stdout)
        // Piped: no progress line, just the summary.
        #expect(!replay.stderr.contains("ETA"))
        #expect(replay.stderr.contains("895 fixes"))
    }

    @Test func replayOfAMissingFileFailsWithTheReason() throws {
        let r = try keeptrack(["replay", "missing.nmea"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("\"kind\":\"error\""))
        #expect(r.stdout.contains("missing.nmea"))
    }

    @Test func replayRejectsLoopingStandardInput() throws {
        let r = try keeptrack(["replay", "-", "--loop"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--loop needs a file"))
    }

    @Test func trackNeedsExactlyOneInput() throws {
        let none = try keeptrack(["track"])
        #expect(none.status == 64)
        #expect(none.stderr.contains("Choose one input: --gpsd [HOST[:PORT]] or --serial DEVICE."))
        let bad = try keeptrack(["track", "--serial", "/dev/ttyUSB0", "--baud", "1234"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--baud must be one of"))
    }

    @Test func trackWithGPSDAcceptsTheFlagWithoutAValue() throws {
        // Parsing only: --gpsd without a value means localhost:2947; --device then validates.
        let r = try keeptrack(["track", "--device", "/dev/ttyACM0"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("Choose one input"))
        let help = try keeptrack(["track", "--help"])
        #expect(help.stdout.contains("tools/fake-receiver"))
    }
}
