import Foundation
import Formats
import Testing

/// A record no store keeps is a typed problem: the code `invalid-record` and the key it is about.
@Suite struct RecordProblemTests {
    static let good = TrailRecord(
        device: "van", sequence: 1, time: 1_715_679_000, latitude: 48.1, longitude: 11.5)

    @Test(arguments: ["lat", "lon", "seq", "time", "device", "speed", "hAcc"])
    func aRecordThatCannotBeStoredNamesItsKey(field: String) throws {
        var r = Self.good
        #expect(r.problem(now: 1_800_000_000) == nil)
        switch field {
        case "lat": r.latitude = 91
        case "lon": r.longitude = -181
        case "seq": r.sequence = -1
        case "time": r.time = 0
        case "device": r.device = ""
        case "speed": r.speed = 1e300
        default: r.horizontalAccuracy = -1
        }
        let problem = try #require(r.problem(now: 1_800_000_000))
        #expect(problem.code == .invalidRecord)
        #expect(problem.field == field)
        #expect(!problem.message.isEmpty)
    }

    @Test func aBatchNamesTheRecordInTheMessageAndKeepsTheKey() throws {
        let record = "{\"seq\":1,\"kind\":\"location\",\"time\":\"2024-05-14T09:30:00.000Z\",\"lat\":48.1,\"lon\":11.5"
        let json =
            "{\"device\":\"van\",\"records\":[\(record)},\(record.replacingOccurrences(of: "1,", with: "2,")),\"course\":400}]}"
        let body = Array(json.utf8)
        #expect(throws: FormatsError.self) { try JSONBatch.decode(body, now: 1_800_000_000) }
        do {
            _ = try JSONBatch.decode(body, now: 1_800_000_000)
        } catch {
            #expect(error.code == .invalidRecord)
            #expect(error.field == "course")
            #expect(error.message.hasPrefix("records[1]: "))
        }
    }
}
