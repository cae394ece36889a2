import Formats
import Foundation
import Testing

/// Issue 39, item 1: Home Assistant's MQTT discovery, as its MQTT integration reads it (checked
/// against a real Home Assistant in Tests/HomeAssistantTests).
@Suite("Home Assistant discovery")
struct HomeAssistantDiscoveryTests {
    func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test(arguments: [
        ("van-1", "van_1"), ("Van 1", "van_1"), ("keeptrack-1a2b3c4d", "keeptrack_1a2b3c4d"), ("--a__b--", "a_b"),
        ("Zürich", "z_rich"), ("", "keeptrack"), ("__", "keeptrack"),
    ])
    func objectIDsAreHomeAssistantsSlugs(device: String, id: String) {
        #expect(HomeAssistantDiscovery.objectID(device) == id)
    }

    @Test func topicsFollowTheDiscoveryPrefixAndTheObjectID() {
        let t = HomeAssistantDiscovery.Topics(device: "van-1")
        #expect(t.trackerConfig == "homeassistant/device_tracker/van_1/config")
        #expect(t.speedConfig == "homeassistant/sensor/van_1_speed/config")
        #expect(t.visitConfig == "homeassistant/sensor/van_1_last_visit/config")
        #expect(t.attributes == "keeptrack/van_1/attributes")
        #expect(t.availability == "keeptrack/van_1/availability")
        #expect(t.status == "homeassistant/status")
        #expect(t.trackerEntity == "device_tracker.van_1")
        let other = HomeAssistantDiscovery.Topics(device: "van-1", prefix: "ha")
        #expect(other.trackerConfig == "ha/device_tracker/van_1/config")
        #expect(other.status == "ha/status")
    }

    /// The tracker's configuration: what Home Assistant requires (`json_attributes_topic`,
    /// `source_type: gps`), availability, and a device block with identifiers, model and sw_version.
    @Test func theTrackerConfigurationNamesItsTopicsAndItsDevice() throws {
        let topics = HomeAssistantDiscovery.Topics(device: "van-1")
        let device = HomeAssistantDiscovery.Device(name: "van-1", softwareVersion: "0.9.1")
        let c = try object(HomeAssistantDiscovery.trackerConfig(device, topics: topics))
        #expect(c["name"] is NSNull)
        #expect(c["unique_id"] as? String == "keeptrack_van_1_tracker")
        #expect(c["object_id"] as? String == "van_1")
        #expect(c["json_attributes_topic"] as? String == "keeptrack/van_1/attributes")
        #expect(c["source_type"] as? String == "gps")
        #expect(c["availability_topic"] as? String == "keeptrack/van_1/availability")
        #expect(c["payload_available"] as? String == "online")
        #expect(c["payload_not_available"] as? String == "offline")
        #expect(c["qos"] as? Int == 1)
        let d = try #require(c["device"] as? [String: Any])
        #expect(d["identifiers"] as? [String] == ["keeptrack_van_1"])
        #expect(d["name"] as? String == "van-1")
        #expect(d["model"] as? String == "keeptrack")
        #expect(d["sw_version"] as? String == "0.9.1")
        let speed = try object(HomeAssistantDiscovery.speedSensorConfig(device, topics: topics))
        #expect(speed["state_topic"] as? String == "keeptrack/van_1/attributes")
        #expect(speed["unit_of_measurement"] as? String == "km/h")
        #expect(speed["device_class"] as? String == "speed")
        #expect((speed["device"] as? [String: Any])?["identifiers"] as? [String] == ["keeptrack_van_1"])
        let visit = try object(HomeAssistantDiscovery.visitSensorConfig(device, topics: topics))
        #expect(visit["state_topic"] as? String == "keeptrack/van_1/visit")
        #expect(visit["device_class"] as? String == "timestamp")
    }

    /// With the endpoint's availability beside the device's (`serve --homeassistant`): both topics in an
    /// `availability` list that must all say online, and no `availability_topic`.
    @Test func aRelaysAvailabilityGoesBesideTheDevicesInEveryConfiguration() throws {
        var topics = HomeAssistantDiscovery.Topics(device: "anna/phone")
        topics.relayAvailability = "keeptrack/_serve/availability"
        let device = HomeAssistantDiscovery.Device(name: "anna/phone", softwareVersion: "0.9.1")
        for config in [
            HomeAssistantDiscovery.trackerConfig(device, topics: topics),
            HomeAssistantDiscovery.speedSensorConfig(device, topics: topics),
        ] {
            let c = try object(config)
            #expect(c["availability_topic"] == nil)
            #expect(c["availability_mode"] as? String == "all")
            let list = try #require(c["availability"] as? [[String: String]])
            #expect(
                list == [
                    [
                        "topic": "keeptrack/anna_phone/availability", "payload_available": "online",
                        "payload_not_available": "offline",
                    ],
                    [
                        "topic": "keeptrack/_serve/availability", "payload_available": "online",
                        "payload_not_available": "offline",
                    ],
                ])
            #expect(c["object_id"] as? String == "anna_phone" || c["object_id"] as? String == "anna_phone_speed")
        }
    }

    /// Numbers, never strings; what is unknown is left out; a battery level the sender gave, in percent.
    @Test func attributesAreNumbersAndLeaveOutWhatIsUnknown() throws {
        var r = TrailRecord(
            device: "van-1", sequence: 1, time: 1_715_679_000.25, latitude: 48.137_366_3, longitude: 11.575_408_7,
            altitude: 536.04, horizontalAccuracy: 9.2, verticalAccuracy: 14, speed: 1.456, course: 32.1)
        r.attributes["batt"] = "87"
        let text = String(decoding: HomeAssistantDiscovery.attributes(r), as: UTF8.self)
        #expect(
            text
                == #"{"latitude":48.1373663,"longitude":11.5754087,"gps_accuracy":9.2,"altitude":536.0,"vertical_accuracy":14.0,"speed":1.46,"course":32.1,"battery_level":87,"time":"2024-05-14T09:30:00.250Z"}"#
        )
        let bare = TrailRecord(device: "van-1", sequence: 2, time: 1_715_679_000, latitude: -1.5, longitude: 2)
        #expect(
            String(decoding: HomeAssistantDiscovery.attributes(bare), as: UTF8.self)
                == #"{"latitude":-1.5000000,"longitude":2.0000000,"time":"2024-05-14T09:30:00.000Z"}"#)
    }

    @Test(
        arguments: [
            (["batt": "87"], 87), (["battery_level": "0.5"], 50), (["battery.level": "0.874"], 87),
            (["batt": "120"], nil),
            (["batt": "x"], nil), ([:], nil),
        ] as [([String: String], Int?)])
    func batteryLevelsAreReadBySendersNames(attributes: [String: String], percent: Int?) {
        #expect(HomeAssistantDiscovery.batteryLevel(attributes) == percent)
    }

    @Test func aVisitNamesItsPlaceAndItsTimes() throws {
        var v = TrailRecord(
            device: "van-1", sequence: 3, kind: .visit, time: 1_715_679_000, latitude: 48.1, longitude: 11.5,
            horizontalAccuracy: 23)
        #expect(
            String(decoding: HomeAssistantDiscovery.visit(v), as: UTF8.self)
                == #"{"arrival":"2024-05-14T09:30:00.000Z","departure":null,"latitude":48.1000000,"longitude":11.5000000,"radius":23.0}"#
        )
        v.span = TrailRecord.Span(end: 1_715_679_600)
        #expect(try object(HomeAssistantDiscovery.visit(v))["departure"] as? String == "2024-05-14T09:40:00.000Z")
    }
}
