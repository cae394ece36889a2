import Geo
import Testing

@testable import NMEA

@Suite("Sentence decoding")
struct SentenceTests {
    @Test func decodesGGAIntoAPositionAltitudeAndQuality() throws {
        let r = decode(nmea("GPGGA,123519.00,4807.038,N,01131.000,E,2,08,0.9,545.4,M,46.9,M,,"))
        let fix = try #require(r.fixes.first)
        #expect(r.fixes.count == 1)
        let nanosecondOfDay: Int64 = (12 * 3600 + 35 * 60 + 19) * 1_000_000_000
        #expect(fix.time?.nanosecondOfDay == nanosecondOfDay)
        #expect(fix.time?.fractionDigits == 2)
        #expect(abs(fix.coordinate!.latitude - (48 + 7.038 / 60)) < 1e-12)
        #expect(abs(fix.coordinate!.longitude - (11 + 31.0 / 60)) < 1e-12)
        #expect(fix.altitudeMSL == 545.4)
        #expect(fix.geoidSeparation == 46.9)
        #expect(fix.quality == .dgps)
        #expect(fix.satellitesUsed == 8)
        #expect(fix.hdop == 0.9)
        #expect(fix.mode == .threeD)
        #expect(fix.horizontalAccuracy == 0.9 * Fix.uere)
        #expect(fix.accuracySource == .dopEstimate)
        #expect(fix.systems == .gps)
    }

    @Test func decodesRMCWithDateSpeedCourseAndVariation() throws {
        let r = decode(nmea("GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,E"))
        let fix = try #require(r.fixes.first)
        #expect(fix.time?.iso8601 == "1994-11-19T22:54:46Z")
        #expect(abs(fix.coordinate!.latitude - (49 + 16.45 / 60)) < 1e-12)
        #expect(abs(fix.coordinate!.longitude + (123 + 11.12 / 60)) < 1e-12)
        #expect(abs(fix.speed! - 0.5 * 0.514444) < 1e-6)
        #expect(fix.course == 54.7)
        #expect(fix.magneticVariation == 20.3)
        #expect(fix.mode == .twoD)
    }

    @Test func decodesRMCWestVariationAsNegative() throws {
        let r = decode(nmea("GPRMC,225446,A,4916.45,N,12311.12,W,000.5,054.7,191194,020.3,W,A"))
        #expect(r.fixes.first?.magneticVariation == -20.3)
    }

    @Test func decodesGLLWithTimeAndStatus() throws {
        let r = decode(nmea("GPGLL,4916.45,N,12311.12,W,225444,A,A"))
        let fix = try #require(r.fixes.first)
        #expect(fix.hasPosition)
        #expect(fix.time?.iso8601 == "22:54:44Z")
        #expect(fix.mode == .twoD)
    }

    @Test func decodesOldGLLWithoutTimeAsUntimed() {
        let r = decode(nmea("GPGLL,4916.45,N,12311.12,W"))
        // No time anywhere: nothing to report.
        #expect(r.fixes.isEmpty)
        #expect(r.statistics.decodedSentences == 1)
    }

    @Test func decodesGSAFixTypeDOPsAndUsedSatellites() throws {
        let text =
            nmea("GPGGA,123519,4807.038,N,01131.000,E,1,04,0.9,545.4,M,46.9,M,,")
            + nmea("GPGSA,A,2,04,05,,09,12,,,24,,,,,2.5,1.3,2.1")
        let fix = try #require(decode(text).fixes.first)
        #expect(fix.mode == .twoD)
        #expect(fix.pdop == 2.5)
        #expect(fix.hdop == 1.3)
        #expect(fix.vdop == 2.1)
        #expect(fix.satellitesUsed == 5)
        // A 2D fix has no vertical accuracy.
        #expect(fix.verticalAccuracy == nil)
    }

    @Test func decodesNMEA41GSAWithSystemIDAndSumsConstellations() throws {
        let text =
            nmea("GNGGA,000001.00,4807.038,N,01131.000,E,1,12,0.8,545.4,M,46.9,M,,")
            + nmea("GNGSA,A,3,01,02,03,04,05,06,,,,,,,1.2,0.8,0.9,1")
            + nmea("GNGSA,A,3,65,66,67,,,,,,,,,,1.2,0.8,0.9,2")
            + nmea("GNGSA,A,3,301,302,,,,,,,,,,,1.2,0.8,0.9,3")
        let fix = try #require(decode(text).fixes.first)
        #expect(fix.satellitesUsed == 12)
        #expect(fix.mode == .threeD)
        #expect(fix.systems.isSuperset(of: [.gps, .glonass, .galileo]))
        #expect(fix.verticalAccuracy == 0.9 * Fix.uere)
    }

    @Test func sumsSatellitesInViewPerTalkerFromGSV() throws {
        let text =
            nmea("GNRMC,000001.00,A,4807.038,N,01131.000,E,0.0,0.0,010124,,,A")
            + nmea("GPGSV,2,1,07,01,40,083,46,02,17,308,41,12,07,344,39,14,22,228,45")
            + nmea("GPGSV,2,2,07,15,40,083,46,16,17,308,41,17,07,344,39")
            + nmea("GPGSV,1,1,07,01,40,083,46,1")  // a second signal group repeats the total
            + nmea("GLGSV,1,1,03,65,40,083,46,66,17,308,41,67,07,344,39")
        let fix = try #require(decode(text).fixes.first)
        #expect(fix.satellitesInView == 10)
    }

    @Test func decodesVTGInBothLayouts() throws {
        let modern =
            nmea("GPRMC,000001,A,4807.038,N,01131.000,E,,,010124,,")
            + nmea("GPVTG,054.7,T,034.4,M,005.5,N,010.2,K,A")
        let fix = try #require(decode(modern).fixes.first)
        #expect(fix.course == 54.7)
        #expect(abs(fix.speed! - 10.2 / 3.6) < 1e-9)
        let old =
            nmea("GPRMC,000001,A,4807.038,N,01131.000,E,,,010124,,")
            + nmea("GPVTG,054.7,034.4,005.5,010.2")
        let oldFix = try #require(decode(old).fixes.first)
        #expect(oldFix.course == 54.7)
        #expect(abs(oldFix.speed! - 10.2 / 3.6) < 1e-9)
    }

    @Test func decodesGNSWithModeLettersPerConstellation() throws {
        let r = decode(nmea("GNGNS,014035.00,4332.69262,S,17235.48549,E,RR,13,0.9,25.63,11.24,,,S"))
        let fix = try #require(r.fixes.first)
        #expect(fix.quality == .rtkFixed)
        #expect(fix.mode == .threeD)
        #expect(fix.satellitesUsed == 13)
        #expect(abs(fix.coordinate!.latitude + (43 + 32.69262 / 60)) < 1e-12)
        let noFix = decode(nmea("GNGNS,014035.00,,,,,NN,00,,,,,,V"))
        #expect(noFix.fixes.first?.mode == Fix.Mode.none)
    }

    @Test func decodesZDADateWithFourDigitYear() throws {
        let text =
            nmea("GPZDA,201530.00,04,07,2002,00,00")
            + nmea("GPGGA,201530.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        let fix = try #require(decode(text).fixes.first)
        #expect(fix.time?.iso8601 == "2002-07-04T20:15:30.00Z")
    }

    @Test func usesGSTSigmasForAccuracy() throws {
        let text =
            nmea("GPGGA,172814.0,3723.46587704,N,12202.26957864,W,2,6,1.2,18.893,M,-25.669,M,2.0,0031")
            + nmea("GPGST,172814.0,0.006,0.023,0.020,273.6,0.023,0.020,0.031")
        let fix = try #require(decode(text).fixes.first)
        #expect(abs(fix.horizontalAccuracy! - (0.023 * 0.023 + 0.020 * 0.020).squareRoot()) < 1e-12)
        #expect(fix.verticalAccuracy == 0.031)
        #expect(fix.accuracySource == .receiver)
    }

    @Test(arguments: ["GP", "GN", "GL", "GA", "GB", "BD", "GQ", "GI", "QZ"])
    func acceptsEveryTalker(_ talker: String) throws {
        let r = decode(nmea("\(talker)GGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"))
        #expect(r.fixes.first?.hasPosition == true)
        #expect(r.statistics.decodedSentences == 1)
    }

    /// A GSA with a fourth DOP where NMEA 4.1 puts its system ID (a BeiDou receiver of the corpus):
    /// its DOPs are read, the sentence is not refused.
    @Test func aGSAWithAFourthDOPInTheSystemIDFieldKeepsItsDOPs() {
        let text =
            nmea("GPGSA,A,3,25,32,,,,,,,,,,,5.1,1.3,4.9,3.3")
            + nmea("GPGGA,120000,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        let r = decode(text, options: .init(strict: true))
        #expect(r.errors.isEmpty)
        #expect(r.fixes.first?.pdop == 5.1 && r.fixes.first?.hdop == 1.3 && r.fixes.first?.vdop == 4.9)
    }

    @Test func countsProprietaryAndUnknownSentencesWithoutRejectingThem() {
        // Vendors' own sentences with longer addresses (Unicore's $GYOACC, $SNRSTAT) are unknown
        // sentences too, not bad ones.
        let text =
            nmea("PGRME,15.0,M,45.0,M,25.0,M") + nmea("GPXYZ,1,2,3")
            + "!AIVDM,1,1,,A,13aGmP0P00PD;88MD5MTDww@2<0L,0*23\r\n"
            + nmea("GYOACC,090624,000654.00,0.003522") + nmea("SNRSTAT,1,1,0,0")
        let r = decode(text, options: .init(strict: true))
        #expect(r.statistics.proprietarySentences == 1)
        #expect(r.statistics.unknownSentences == 4)
        #expect(r.statistics.rejected == 0)
        #expect(r.errors.isEmpty)
    }

    @Test func keepsFractionalSecondsDigitsOfTheLog() throws {
        let r = decode(nmea("GPRMC,235959.125,A,4807.038,N,01131.000,E,,,311224,,"))
        #expect(r.fixes.first?.time?.iso8601 == "2024-12-31T23:59:59.125Z")
    }
}
