import Geo
import Testing

@testable import NMEA

@Suite("Epoch assembly")
struct EpochTests {
    let gga1 = nmea("GPGGA,235958.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
    let rmc1 = nmea("GPRMC,235958.00,A,4807.038,N,01131.000,E,1.0,90.0,311223,,,A")
    let gga2 = nmea("GPGGA,235959.00,4807.039,N,01131.001,E,1,08,0.9,545.5,M,46.9,M,,")

    @Test func mergesSentencesWithTheSameTimeIntoOneFix() throws {
        let r = decode(rmc1 + gga1 + nmea("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1") + gga2)
        #expect(r.fixes.count == 2)
        let fix = r.fixes[0]
        #expect(fix.time?.iso8601 == "2023-12-31T23:59:58.00Z")
        #expect(fix.altitudeMSL == 545.4)  // from GGA
        #expect(fix.speed != nil)  // from RMC
        #expect(fix.pdop == 2.5)  // from GSA, which has no time
        #expect(fix.lines == 1...3)
        // The second epoch inherits the date.
        #expect(r.fixes[1].time?.iso8601 == "2023-12-31T23:59:59.00Z")
    }

    @Test func untimedSentencesBeforeTheFirstTimedOneJoinItsEpoch() throws {
        let r = decode(nmea("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1") + gga1)
        #expect(r.fixes.count == 1)
        #expect(r.fixes[0].pdop == 2.5)
        #expect(r.fixes[0].lines == 1...2)
    }

    @Test func rmcStatusVMeansNoFixEvenWithAPosition() throws {
        let r = decode(nmea("GPRMC,120000,V,4807.038,N,01131.000,E,,,010124,,,N"))
        let fix = try #require(r.fixes.first)
        #expect(fix.mode == .none)
        #expect(!fix.hasPosition)
    }

    @Test func ggaQualityZeroMeansNoFixWhateverRMCSays() throws {
        let r = decode(
            nmea("GPRMC,120000,A,4807.038,N,01131.000,E,,,010124,,,A")
                + nmea("GPGGA,120000,4807.038,N,01131.000,E,0,00,,,M,,M,,"))
        #expect(r.fixes.first?.mode == Fix.Mode.none)
    }

    @Test func gsaFixTypeOneMeansNoFix() {
        let r = decode(gga1 + nmea("GPGSA,A,1,,,,,,,,,,,,,,,"))
        #expect(r.fixes.first?.mode == Fix.Mode.none)
    }

    @Test func ggaWithoutAltitudeIsTwoD() {
        let r = decode(nmea("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,,M,,M,,"))
        #expect(r.fixes.first?.mode == .twoD)
    }

    @Test func rollsTheDateOverAtMidnightWithoutADateSentence() {
        let text =
            rmc1 + gga1 + gga2 + nmea("GPGGA,000000.00,4807.040,N,01131.002,E,1,08,0.9,545.6,M,46.9,M,,")
            + nmea("GPGGA,000001.00,4807.041,N,01131.003,E,1,08,0.9,545.6,M,46.9,M,,")
        let times = decode(text).fixes.map { $0.time?.iso8601 }
        #expect(
            times == [
                "2023-12-31T23:59:58.00Z", "2023-12-31T23:59:59.00Z", "2024-01-01T00:00:00.00Z",
                "2024-01-01T00:00:01.00Z",
            ])
    }

    @Test func takesTheRMCDateWhenItArrivesAfterGGAInTheRolloverEpoch() {
        let text =
            rmc1 + nmea("GPGGA,000000.00,4807.040,N,01131.002,E,1,08,0.9,545.6,M,46.9,M,,")
            + nmea("GPRMC,000000.00,A,4807.040,N,01131.002,E,1.0,90.0,010124,,,A")
        #expect(decode(text).fixes.map { $0.time?.iso8601 } == ["2023-12-31T23:59:58.00Z", "2024-01-01T00:00:00.00Z"])
    }

    @Test(arguments: [("010180", 1980), ("010179", 2079), ("010199", 1999), ("010100", 2000), ("010124", 2024)])
    func pivotsTwoDigitYearsAt1980(_ date: String, _ year: Int) {
        let r = decode(nmea("GPRMC,120000,A,4807.038,N,01131.000,E,,,\(date),,"))
        #expect(r.fixes.first?.time?.iso8601.hasPrefix("\(year)-01-01") == true)
    }

    @Test func takesTheCenturyFromTheLastZDA() {
        let text = nmea("GPZDA,120000,01,01,2101,00,00") + nmea("GPRMC,120001,A,4807.038,N,01131.000,E,,,010101,,")
        let r = decode(text)
        #expect(r.fixes.last?.time?.iso8601.hasPrefix("2101-01-01") == true)
    }

    @Test func logsWithoutADateGiveTimesOfDayOrTheReferenceDate() {
        let text = nmea("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        #expect(decode(text).fixes.first?.time?.iso8601 == "12:00:00Z")
        let day = Int32(GNSSTime.daysFromCivil(year: 2024, month: 3, day: 9))
        #expect(decode(text, options: .init(referenceDay: day)).fixes.first?.time?.iso8601 == "2024-03-09T12:00:00Z")
    }

    @Test func flushEmitsTheEpochNowAndDropsItsStragglers() {
        var decoder = NMEADecoder()
        var fixes: [Fix] = []
        let first = Array((rmc1).utf8)
        let straggler = Array(gga1.utf8)
        first.withUnsafeBytes { try? decoder.decode($0) { fixes.append($0) } }
        #expect(fixes.isEmpty)
        decoder.flush { fixes.append($0) }
        #expect(fixes.count == 1)
        straggler.withUnsafeBytes { try? decoder.decode($0) { fixes.append($0) } }
        try? decoder.finish { fixes.append($0) }
        #expect(fixes.count == 1)
        #expect(decoder.statistics.lateSentences == 1)
    }

    /// A straggler that an untimed sentence (GSA) comes before is still a straggler: the epoch
    /// flushed after a pause is one fix, not two of the same time; the next epoch is one more.
    @Test func stragglersAfterAFlushGiveNoSecondFixOfTheSameTime() {
        var decoder = NMEADecoder()
        var fixes: [Fix] = []
        func feed(_ text: String) { Array(text.utf8).withUnsafeBytes { try? decoder.decode($0) { fixes.append($0) } } }
        feed(rmc1)
        decoder.flush { fixes.append($0) }
        feed(nmea("GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1") + gga1 + nmea("GPGSV,1,1,04,04,40,083,46"))
        #expect(fixes.count == 1)
        feed(gga2)
        try? decoder.finish { fixes.append($0) }
        #expect(fixes.map { $0.time?.iso8601 } == ["2023-12-31T23:59:58.00Z", "2023-12-31T23:59:59.00Z"])
        #expect(fixes[1].pdop == nil)  // the straggler's GSA is not lent to the next epoch
        #expect(decoder.statistics.lateSentences == 1)
    }
}

@Suite("Epoch assembly: receivers without a fix")
struct NoFixEpochTests {
    @Test func anUntimedNoFixEpochDoesNotSpoilTheFirstTimedOne() throws {
        // Garmin receivers send empty time fields until they have a fix (corpus: foretrex-201).
        let text =
            nmea("GPRMC,,V,,,,,,,260810,1.0,E,N") + nmea("GPGGA,,,,,,0,00,,,M,,M,,")
            + nmea("GPGSA,A,1,,,,,,,,,,,,,,,") + nmea("GPRMC,200004,A,5504.4343,N,01025.5386,E,0.0,0.0,260810,1.0,E,D")
            + nmea("GPGGA,200004,5504.4343,N,01025.5386,E,2,03,2.5,-9.1,M,43.9,M,,")
            + nmea("GPGSA,A,2,06,,,,,,19,22,,,,,2.7,2.5,1.0")
        let r = decode(text)
        #expect(r.fixes.count == 1)
        let fix = try #require(r.fixes.first)
        #expect(fix.mode == .twoD)
        #expect(fix.hasPosition)
        #expect(fix.lines == 4...6)
    }
}
