/// Home Assistant's MQTT discovery for one tracker: the retained configurations that make Home
/// Assistant create a device with a device tracker and sensors, and the messages that move them.
///
/// For a device whose object id (``objectID(_:)``) is `van_1`, under the discovery prefix
/// `homeassistant` (Home Assistant's default):
/// - `homeassistant/device_tracker/van_1/config`: the tracker (`device_tracker.van_1`), reading
///   its position from `keeptrack/van_1/attributes` (`source_type: gps`);
/// - `homeassistant/sensor/van_1_speed/config`: its speed in km/h (`sensor.van_1_speed`), from the
///   same attributes;
/// - `homeassistant/sensor/van_1_last_visit/config`: the last visit (`sensor.van_1_last_visit`): its
///   arrival as the state, its place (`latitude`, `longitude`, `radius`) and departure as attributes,
///   from `keeptrack/van_1/visit`;
/// - `keeptrack/van_1/availability`: `online` or `offline` (every entity of the device follows it).
///
/// A location's attributes are numbers, never strings (Home Assistant drops an update whose
/// `latitude` is a string): `latitude`, `longitude` (7 decimals), `gps_accuracy` (metres, when
/// the receiver gave one), `altitude`, `vertical_accuracy`, `speed` (m/s), `course` (degrees),
/// `battery_level` (percent, when the record carries a battery level), and `time`, the fix's time
/// (ISO 8601). Each message replaces all the attributes, so a missing one is unknown.
public enum HomeAssistantDiscovery {
    /// The prefix Home Assistant listens for discovery on, unless configured otherwise.
    public static let defaultPrefix = "homeassistant"
    /// The availability payloads.
    public static let online = "online"
    public static let offline = "offline"

    /// The object id the device's topics and entity ids are named with (the configurations give it as
    /// `object_id`): the device id lowercased, each run of characters other than ASCII letters and
    /// digits one `_`, none at either end (`Van-1` → `van_1`, `Zürich` → `z_rich`; `keeptrack` when
    /// nothing is left). Two device ids that differ only there (`van-1`, `Van 1`) are one device to
    /// Home Assistant.
    public static func objectID(_ device: String) -> String {
        var out = ""
        var gap = false
        for scalar in device.unicodeScalars {
            let lower = scalar.properties.lowercaseMapping
            if lower.count == 1, let c = lower.unicodeScalars.first, c.isASCII,
                ("a"..."z").contains(c) || ("0"..."9").contains(c)
            {
                if gap && !out.isEmpty { out.append("_") }
                gap = false
                out.unicodeScalars.append(c)
            } else {
                gap = true
            }
        }
        return out.isEmpty ? "keeptrack" : out
    }

    /// The topics of one device.
    public struct Topics: Hashable, Sendable {
        /// The discovery prefix (``HomeAssistantDiscovery/defaultPrefix`` unless Home Assistant's MQTT
        /// integration was set up with another).
        public var prefix: String
        /// ``HomeAssistantDiscovery/objectID(_:)`` of the device id.
        public var objectID: String
        /// Where the device's own messages go: `keeptrack/OBJECT_ID` by default.
        public var base: String
        /// A second availability topic every entity also follows, `nil` (the default) for none: the
        /// endpoint's own (`keeptrack serve --homeassistant`), whose last will is `offline`, so that
        /// its devices show unavailable while it is gone. With it the configurations carry an
        /// `availability` list (both topics, `availability_mode: all`) instead of `availability_topic`.
        public var relayAvailability: String?

        public init(device: String, prefix: String = HomeAssistantDiscovery.defaultPrefix, base: String? = nil) {
            self.prefix = prefix
            objectID = HomeAssistantDiscovery.objectID(device)
            self.base = base ?? "keeptrack/\(objectID)"
        }

        public var trackerConfig: String { "\(prefix)/device_tracker/\(objectID)/config" }
        public var speedConfig: String { "\(prefix)/sensor/\(objectID)_speed/config" }
        public var visitConfig: String { "\(prefix)/sensor/\(objectID)_last_visit/config" }
        /// A location's attributes (retained).
        public var attributes: String { "\(base)/attributes" }
        /// `online` / `offline` (retained; `offline` is the connection's last will).
        public var availability: String { "\(base)/availability" }
        /// The last visit (retained).
        public var visit: String { "\(base)/visit" }
        /// Home Assistant's own status: `online` when it (re)connects and has subscribed (its birth
        /// message), `offline` when it goes (its last will).
        public var status: String { "\(prefix)/status" }

        /// The entity ids Home Assistant gives the tracker and the sensors.
        public var trackerEntity: String { "device_tracker.\(objectID)" }
        public var speedEntity: String { "sensor.\(objectID)_speed" }
        public var visitEntity: String { "sensor.\(objectID)_last_visit" }
    }

    /// What Home Assistant shows of the device (its `device` block).
    public struct Device: Hashable, Sendable {
        /// The device's name in Home Assistant (the tracker takes it): the device id.
        public var name: String
        /// The model line. The default is `keeptrack`.
        public var model = "keeptrack"
        public var manufacturer = "KeepTrack"
        /// The software version (`sw_version`).
        public var softwareVersion: String

        public init(name: String, softwareVersion: String) {
            self.name = name
            self.softwareVersion = softwareVersion
        }
    }

    /// The tracker's discovery configuration (publish it retained on ``Topics/trackerConfig``).
    public static func trackerConfig(_ device: Device, topics: Topics) -> [UInt8] {
        var out: [UInt8] = []
        // No name of its own: the tracker is named after the device.
        ByteWriting.appendStatic("{\"name\":null", to: &out)
        common(suffix: "", device, topics, to: &out)
        member("json_attributes_topic", topics.attributes, to: &out)
        ByteWriting.appendStatic(",\"source_type\":\"gps\",\"icon\":\"mdi:map-marker\"}", to: &out)
        return out
    }

    /// The speed sensor's configuration (km/h, from the attributes; unknown when a location has no speed).
    public static func speedSensorConfig(_ device: Device, topics: Topics) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"name\":\"Speed\"", to: &out)
        common(suffix: "_speed", device, topics, to: &out)
        member("state_topic", topics.attributes, to: &out)
        member(
            "value_template",
            "{{ (value_json.speed * 3.6) | round(1) if value_json.speed is defined else 'None' }}", to: &out)
        ByteWriting.appendStatic(
            ",\"unit_of_measurement\":\"km/h\",\"device_class\":\"speed\",\"state_class\":\"measurement\"}", to: &out)
        return out
    }

    /// The last visit sensor's configuration (its arrival as a timestamp, its place as attributes).
    public static func visitSensorConfig(_ device: Device, topics: Topics) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"name\":\"Last visit\"", to: &out)
        common(suffix: "_last_visit", device, topics, to: &out)
        member("state_topic", topics.visit, to: &out)
        member("json_attributes_topic", topics.visit, to: &out)
        member("value_template", "{{ value_json.arrival }}", to: &out)
        ByteWriting.appendStatic(",\"device_class\":\"timestamp\",\"icon\":\"mdi:map-marker-radius\"}", to: &out)
        return out
    }

    /// Every entity's `unique_id`, `object_id`, QoS, availability and device block.
    static func common(suffix: String, _ device: Device, _ topics: Topics, to out: inout [UInt8]) {
        member("unique_id", "keeptrack_\(topics.objectID)\(suffix.isEmpty ? "_tracker" : suffix)", to: &out)
        member("object_id", topics.objectID + suffix, to: &out)
        ByteWriting.appendStatic(",\"qos\":1", to: &out)
        if let relay = topics.relayAvailability {
            ByteWriting.appendStatic(",\"availability\":[", to: &out)
            for (i, topic) in [topics.availability, relay].enumerated() {
                ByteWriting.appendStatic(i == 0 ? "{\"topic\":" : ",{\"topic\":", to: &out)
                ByteWriting.appendJSONString(topic, to: &out)
                member("payload_available", online, to: &out)
                member("payload_not_available", offline, to: &out)
                out.append(UInt8(ascii: "}"))
            }
            ByteWriting.appendStatic("],\"availability_mode\":\"all\"", to: &out)
        } else {
            member("availability_topic", topics.availability, to: &out)
            member("payload_available", online, to: &out)
            member("payload_not_available", offline, to: &out)
        }
        ByteWriting.appendStatic(",\"device\":{\"identifiers\":[", to: &out)
        ByteWriting.appendJSONString("keeptrack_\(topics.objectID)", to: &out)
        ByteWriting.appendStatic("]", to: &out)
        member("name", device.name, to: &out)
        member("model", device.model, to: &out)
        member("manufacturer", device.manufacturer, to: &out)
        member("sw_version", device.softwareVersion, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    static func member(_ key: String, _ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: ","))
        ByteWriting.appendJSONString(key, to: &out)
        out.append(UInt8(ascii: ":"))
        ByteWriting.appendJSONString(value, to: &out)
    }

    /// A position's attributes (locations and heartbeats), for ``Topics/attributes``.
    public static func attributes(_ r: TrailRecord) -> [UInt8] {
        var out: [UInt8] = []
        func number(_ key: StaticString, _ v: Double?, decimals: Int) {
            // A value no fixed form holds is left out (records are validated before they are sent).
            guard let v, v.isFinite, abs(v) < 1e12 else { return }
            ByteWriting.appendStatic(key, to: &out)
            ByteWriting.appendFixed(v, decimals: decimals, to: &out)
        }
        ByteWriting.appendStatic("{\"latitude\":", to: &out)
        ByteWriting.appendFixed(r.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"longitude\":", to: &out)
        ByteWriting.appendFixed(r.longitude, decimals: 7, to: &out)
        number(",\"gps_accuracy\":", r.horizontalAccuracy, decimals: 1)
        number(",\"altitude\":", r.altitude, decimals: 1)
        number(",\"vertical_accuracy\":", r.verticalAccuracy, decimals: 1)
        number(",\"speed\":", r.speed, decimals: 2)
        number(",\"course\":", r.course, decimals: 1)
        if let battery = batteryLevel(r.attributes) {
            ByteWriting.appendStatic(",\"battery_level\":", to: &out)
            ByteWriting.appendInt(Int64(battery), to: &out)
        }
        ByteWriting.appendStatic(",\"time\":\"", to: &out)
        ISOTime.append(r.time, to: &out)
        ByteWriting.appendStatic("\"}", to: &out)
        return out
    }

    /// A visit's message, for ``Topics/visit``: `arrival`, `departure` (`null` while there),
    /// `latitude`, `longitude` (its centre) and `radius` (its spread, metres).
    public static func visit(_ r: TrailRecord) -> [UInt8] {
        var out: [UInt8] = []
        ByteWriting.appendStatic("{\"arrival\":\"", to: &out)
        ISOTime.append(r.time, to: &out)
        ByteWriting.appendStatic("\",\"departure\":", to: &out)
        ISOTime.appendQuoted(r.span?.end, to: &out)
        ByteWriting.appendStatic(",\"latitude\":", to: &out)
        ByteWriting.appendFixed(r.latitude, decimals: 7, to: &out)
        ByteWriting.appendStatic(",\"longitude\":", to: &out)
        ByteWriting.appendFixed(r.longitude, decimals: 7, to: &out)
        if let radius = r.horizontalAccuracy, radius.isFinite {
            ByteWriting.appendStatic(",\"radius\":", to: &out)
            ByteWriting.appendFixed(radius, decimals: 1, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The battery level in percent a record's attributes carry, by the senders' names: `batt`
    /// (percent: OsmAnd, OwnTracks), `battery_level` and `battery.level` (a fraction from 0 to 1:
    /// Overland, Traccar Client's JSON). `nil` when none is there or it is out of range.
    public static func batteryLevel(_ attributes: [String: String]) -> Int? {
        func read(_ key: String, scale: Double) -> Int? {
            guard let text = attributes[key], let v = Double(text), v.isFinite else { return nil }
            let percent = (v * scale).rounded()
            return (0...100).contains(percent) ? Int(percent) : nil
        }
        return read("batt", scale: 1) ?? read("battery_level", scale: 100) ?? read("battery.level", scale: 100)
    }
}
