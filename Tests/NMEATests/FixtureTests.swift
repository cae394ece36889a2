import KeepTrackTesting
import Foundation
import Geo
import Testing

@testable import NMEA

/// Checks the decoder against the truth sidecars the fixture generator wrote.
@Suite("Fixtures against their truth")
struct FixtureTests {
    struct Corruption: Decodable {
        var line: Int
        var byte_offset: Int64
        var `class`: String
        var sentence_valid: Bool
    }

    struct CorruptedTruth: Decodable {
        var corruptions: [Corruption]
        var lf_lines_total: Int
        var bytes_total: Int64
        var intact_sentences_total: Int
    }

    struct Truth: Decodable {
        var file: String
        var epochs_total: Int
        var epochs_with_valid_position: Int
    }

    /// Which decoder error code each corruption class must produce (nil: not an error).
    static let expectedCode: [String: NMEAError.Code?] = [
        "bad_checksum": .badChecksum, "missing_checksum": .missingChecksum, "nonhex_checksum": .invalidChecksumField,
        "truncated": .missingChecksum, "binary_garbage_line": nil, "nul_run_prefix": nil, "ff_run_prefix": nil,
        "overlong_line": nil, "lf_only_ending": nil, "cr_only_ending": nil, "empty_numeric_fields": .malformedField,
        "letters_in_numeric": .malformedField, "out_of_range_minutes": .fieldOutOfRange,
        "out_of_range_lat": .fieldOutOfRange, "out_of_range_month": .fieldOutOfRange,
        "out_of_range_hour": .fieldOutOfRange, "unknown_sentence": nil, "proprietary_pubx": nil,
        "proprietary_pgrme": nil, "ais_vdm": nil, "too_few_fields": .tooFewFields,
    ]

    @Test func reportsEveryInjectedCorruptionAtItsLineAndByte() throws {
        let truth = try JSONDecoder().decode(
            CorruptedTruth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("corrupted.truth.json"))))
        let r = decodeChunked(try fixtureBytes("corrupted.nmea"), chunk: 4096)
        var expected: [(Int, Int64, NMEAError.Code)] = []
        for c in truth.corruptions {
            let code = try #require(Self.expectedCode[c.class], "unknown corruption class \(c.class)")
            if let code { expected.append((c.line, c.byte_offset, code)) }
        }
        let got = r.errors.map { ($0.line, $0.byteOffset, $0.code) }
        #expect(got.map(\.0) == expected.map(\.0))
        #expect(got.map(\.1) == expected.map(\.1))
        #expect(got.map(\.2) == expected.map(\.2))
        #expect(r.statistics.bytes == truth.bytes_total)
        #expect(r.statistics.lines == truth.lf_lines_total)
        // Unknown ($GPXYZ, !AIVDM x2) and proprietary sentences are counted, not rejected.
        #expect(r.statistics.unknownSentences == 3)
        #expect(r.statistics.proprietarySentences == 2)
        #expect(r.statistics.decodedSentences == truth.intact_sentences_total)
        #expect(r.statistics.skippedBytes > 1500)
    }

    @Test(arguments: ["walk-15min", "drive-1h", "drive-10hz", "midnight", "nodate", "visits-night"])
    func decodesEveryEpochOfACleanFixture(_ name: String) throws {
        let truth = try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("\(name).truth.json"))))
        var decoder = NMEADecoder(options: .init(strict: true))
        var fixes: [Fix] = []
        try decoder.decodeFile(fixturePath(truth.file)) { fixes.append($0) }
        #expect(fixes.count == truth.epochs_total)
        #expect(fixes.filter(\.hasPosition).count == truth.epochs_with_valid_position)
        #expect(decoder.statistics.rejected == 0)
        // Times increase strictly.
        let times = fixes.compactMap { $0.time }
        #expect(zip(times, times.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func readsTheGzipDayLikeItsDecompressedBytes() throws {
        var decoder = NMEADecoder(options: .init(strict: true))
        var count = 0
        var withPosition = 0
        var last: GNSSTime?
        var monotonic = true
        try decoder.decodeFile(fixturePath("day-24h.nmea.gz")) { fix in
            count += 1
            if fix.hasPosition { withPosition += 1 }
            if let t = fix.time, let l = last, !(l < t) { monotonic = false }
            last = fix.time
        }
        let truth = try JSONDecoder().decode(
            Truth.self, from: Data(contentsOf: URL(fileURLWithPath: fixturePath("day-24h.truth.json"))))
        #expect(count == truth.epochs_total)
        #expect(withPosition == truth.epochs_with_valid_position)
        #expect(monotonic)
    }

    @Test func nodateFixtureHasNoDatesAndMidnightFixtureRollsOver() throws {
        var fixes: [Fix] = []
        var d = NMEADecoder()
        try d.decodeFile(fixturePath("nodate.nmea")) { fixes.append($0) }
        #expect(fixes.allSatisfy { $0.time?.day == nil })
        fixes = []
        var m = NMEADecoder()
        try m.decodeFile(fixturePath("midnight.nmea")) { fixes.append($0) }
        let days = Set(fixes.compactMap { $0.time?.day })
        #expect(days.count == 2)
        #expect(fixes.allSatisfy { $0.time?.day != nil })
    }

    @Test func reportsAMissingFileAsAnIOError() {
        var d = NMEADecoder()
        let error = #expect(throws: NMEAError.self) { try d.decodeFile("/nonexistent/x.nmea") { _ in } }
        #expect(error?.code == .io)
        #expect(error?.description.contains("/nonexistent/x.nmea") == true)
        #expect(error?.message.contains("No such file") == true)
    }
}
