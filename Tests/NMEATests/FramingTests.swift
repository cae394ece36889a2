import KeepTrackTesting
import Foundation
import Geo
import Testing

@testable import NMEA

@Suite("Framing and corruption")
struct FramingTests {
    let good = nmea("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    let good2 = nmea("GPGGA,120002,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")

    /// Past `diagnosticLimit`, rejected sentences are counted without reaching the handler.
    @Test func passesRejectedSentencesToTheHandlerUpToItsLimit() throws {
        let bad = "$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*00\r\n"
        var decoder = NMEADecoder()
        var errors: [NMEAError] = []
        decoder.diagnosticHandler = { errors.append($0) }
        decoder.diagnosticLimit = 2
        let bytes = Array((good + bad + bad + bad + good2 + bad + bad).utf8)
        var fixes = 0
        try bytes.withUnsafeBytes { try decoder.decode($0) { _ in fixes += 1 } }
        try decoder.finish { _ in fixes += 1 }
        #expect(errors.map(\.line) == [2, 3])
        #expect(errors.allSatisfy { $0.code == .badChecksum && $0.message.contains("checksum is 00") })
        #expect(decoder.statistics.badChecksums == 5)
        #expect(fixes == 2)
    }

    @Test func rejectsSentenceWithBadChecksumAndSaysWhere() throws {
        let bad = "$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*00\r\n"
        let r = decode(good + bad)
        let e = try #require(r.errors.first)
        #expect(e.code == .badChecksum)
        #expect(e.line == 2)
        #expect(e.byteOffset == Int64(good.utf8.count))
        #expect(e.text.hasPrefix("$GPGGA,120001"))
        #expect(e.message.contains("checksum is 00"))
        #expect(r.fixes.count == 1)
        #expect(r.statistics.badChecksums == 1)
    }

    @Test(arguments: [
        ("$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,\r\n", NMEAError.Code.missingChecksum),
        ("$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*ZQ\r\n", .invalidChecksumField),
        ("$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*4\r\n", .invalidChecksumField),
        ("$GPGGA,120001,4807.038,N,01131.0" + nmea("GPXYZ,1"), .truncatedSentence),
        ("$GPGGA,120001,4807.0\u{01}38,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*00\r\n", .invalidCharacter),
        ("$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*48 junk\r\n", .trailingCharacters),
        (nmea("GPGGA,120001,48a7.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), .malformedField),
        (nmea("GPGGA,120001,4867.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), .fieldOutOfRange),
        (nmea("GPGGA,250001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), .fieldOutOfRange),
        (nmea("GPGGA,120001,9130.000,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), .fieldOutOfRange),
        (nmea("GPRMC,120001,A,4807.038,N,01131.000,E,,,011324,,"), .fieldOutOfRange),
        (nmea("GPGGA,120001,4807.038,N"), .tooFewFields),
        (nmea("GPGGA,120001,,,,,1,08,0.9,545.4,M,46.9,M,,"), .malformedField),
        (nmea("GPGGA,120001,4807.038,X,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), .malformedField),
        (nmea("GPGG,120001"), .invalidAddress),
        (nmea("gpgga,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"), .invalidAddress),
    ])
    func rejectsEachCorruptionClassWithItsCode(_ line: String, _ code: NMEAError.Code) throws {
        let r = decode(good + line + good2)
        let e = try #require(r.errors.first, "expected \(code) for \(line)")
        #expect(e.code == code)
        #expect(e.line == 2)
        #expect(r.errors.count == 1)
        // Nothing already accepted is lost, and decoding resumes after the bad sentence.
        #expect(r.fixes.filter(\.hasPosition).count == 2)
    }

    @Test func rejectsOverLongLinesAndResumes() throws {
        let long = "$GPGGA," + String(repeating: "1", count: 2000) + "\r\n"
        let r = decode(good + long + good2)
        #expect(r.errors.map(\.code) == [.lineTooLong])
        #expect(r.fixes.count == 2)
        #expect(r.statistics.skippedBytes >= 2000)
    }

    @Test func skipsAndCountsGarbageBetweenSentences() {
        let garbage: [UInt8] = [0x00, 0xFF, 0xB5, 0x62, 0x01, 0x07, 0x41, 0x42]
        var bytes = Array(good.utf8)
        bytes += garbage
        bytes += Array(good2.utf8)
        let r = decodeChunked(bytes, chunk: 1 << 20)
        #expect(r.statistics.skippedBytes == Int64(garbage.count))
        #expect(r.errors.isEmpty)
        #expect(r.fixes.count == 2)
    }

    @Test func acceptsLFOnlyAndCROnlyLineEndingsAndCountsLineFeeds() {
        let text =
            nmea("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,", ending: "\n")
            + nmea("GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,", ending: "\r")
            + nmea("GPGGA,120002,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,", ending: "\r\n")
            + nmea("GPGGA,120003,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        let r = decode(text)
        // Line numbers count line feeds, as editors do: the CR-only sentence shares line 2.
        #expect(r.fixes.map { $0.lines?.lowerBound } == [1, 2, 2, 3])
        #expect(r.statistics.lines == 3)
    }

    @Test func reportsASentenceCutOffByTheEndOfInput() throws {
        let r = decode(good + "$GPGGA,120001,4807")
        #expect(r.errors.map(\.code) == [.truncatedSentence])
        #expect(r.errors.first?.line == 2)
        #expect(r.fixes.count == 1)
    }

    /// A file whose last sentence is whole up to its checksum but has no line end (written without a
    /// last newline, or cut right there) keeps that sentence; one cut before its checksum's end does not.
    @Test func aWholeLastSentenceWithoutALineEndIsDecoded() throws {
        let last = nmea("GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,", ending: "")
        let r = decode(good + last)
        #expect(r.errors.isEmpty, "\(r.errors)")
        #expect(r.fixes.map { $0.lines?.lowerBound } == [1, 2])
        #expect(r.statistics.lines == 2 && r.statistics.bytes == Int64((good + last).utf8.count))
        let cut = decode(good + last.dropLast())
        #expect(cut.errors.map(\.code) == [.truncatedSentence] && cut.fixes.count == 1)
    }

    @Test func strictModeThrowsTheFirstBadSentenceWithItsPosition() throws {
        let bad = "$GPGGA,120001,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*00\r\n"
        var decoder = NMEADecoder(options: .init(strict: true, sourceName: "test.nmea"))
        var fixes: [Fix] = []
        let bytes = Array(
            (good + nmea("GPGGA,115959,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,") + bad + good).utf8)
        let error = #expect(throws: NMEAError.self) {
            try bytes.withUnsafeBytes { raw in try decoder.decode(raw) { fixes.append($0) } }
        }
        #expect(error?.code == .badChecksum)
        #expect(error?.line == 3)
        #expect(error?.file == "test.nmea")
        #expect(error?.description.hasPrefix("test.nmea:3: byte \(2 * good.utf8.count): bad-checksum") == true)
        // The fix completed before the bad sentence was delivered.
        #expect(fixes.count == 1)
    }

    @Test(arguments: [1, 2, 3, 5, 7, 13, 64, 100, 1000, 4096, 65536])
    func givesTheSameResultForEveryChunkSize(_ chunk: Int) throws {
        let bytes = try fixtureBytes("corrupted.nmea")
        let whole = decodeChunked(bytes, chunk: bytes.count)
        let chunked = decodeChunked(bytes, chunk: chunk)
        #expect(chunked.fixes == whole.fixes)
        #expect(chunked.statistics == whole.statistics)
        #expect(chunked.errors == whole.errors)
    }
}
