import Geo
import Testing

@testable import Formats

/// The visit and trip lines, byte for byte: the schema other tools read (docs/protocols.md, "Location events").
@Suite("Event JSON: visits and trips")
struct EventJSONTests {
    let place = Coordinate(latitude: 48.137154, longitude: 11.576124)
    let home = Coordinate(latitude: 48.1, longitude: -11.55)

    func line(_ body: (inout [UInt8]) -> Void) -> String {
        var out: [UInt8] = []
        body(&out)
        return String(decoding: out, as: UTF8.self)
    }

    /// CoreLocation's −1 for an unknown speed, course or altitude is `null`, as docs/protocols.md says.
    @Test func aLocationsUnknownValuesAreNull() {
        let unknown = Location(coordinate: place, horizontalAccuracy: 10, timestamp: 1_715_679_000)
        #expect(
            line { EventJSON.appendLocation("location", unknown, to: &$0) }
                == #"{"event":"location","time":"2024-05-14T09:30:00.000Z","lat":48.137154000,"lon":11.576124000,"#
                + #""hAcc":10.00,"alt":null,"speed":null,"course":null}"# + "\n")
    }

    @Test func aVisitAtArrivalHasANullDeparture() {
        let text = line {
            EventJSON.appendVisit(
                time: 1_767_225_780, arrival: 1_767_225_600, departure: nil, coordinate: place,
                horizontalAccuracy: 7.254, to: &$0)
        }
        #expect(
            text == """
                {"event":"visit","time":"2026-01-01T00:03:00.000Z","arrival":"2026-01-01T00:00:00.000Z",\
                "departure":null,"lat":48.137154000,"lon":11.576124000,"hAcc":7.25}

                """)
    }

    @Test func aVisitAtDepartureHasBothTimes() {
        let text = line {
            EventJSON.appendVisit(
                time: 1_767_229_260.5, arrival: 1_767_225_600, departure: 1_767_229_200.25,
                coordinate: home, horizontalAccuracy: 12, to: &$0)
        }
        #expect(
            text == """
                {"event":"visit","time":"2026-01-01T01:01:00.500Z","arrival":"2026-01-01T00:00:00.000Z",\
                "departure":"2026-01-01T01:00:00.250Z","lat":48.100000000,"lon":-11.550000000,"hAcc":12.00}

                """)
    }

    @Test func aTripHasItsFiguresAndBothEnds() {
        let text = line {
            EventJSON.appendTrip(
                start: 1_767_226_800, end: 1_767_227_700, distance: 4_500.04, maximumSpeed: 12.3456,
                from: place, to: home, to: &$0)
        }
        #expect(
            text == """
                {"event":"trip","start":"2026-01-01T00:20:00.000Z","end":"2026-01-01T00:35:00.000Z","distance":4500.0,\
                "duration":900.000,"avgSpeed":5.000,"maxSpeed":12.346,"startLat":48.137154000,"startLon":11.576124000,\
                "endLat":48.100000000,"endLon":-11.550000000}

                """)
    }

    @Test func aTripWithoutDurationHasNoAverageSpeed() {
        let text = line {
            EventJSON.appendTrip(
                start: 1_767_226_800, end: 1_767_226_800, distance: 0, maximumSpeed: 0, from: place,
                to: place, to: &$0)
        }
        #expect(text.contains(#""distance":0.0,"duration":0.000,"avgSpeed":0.000,"maxSpeed":0.000,"#))
    }
}
