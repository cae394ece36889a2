import ConfigFile

/// A schema with every kind of key.
let reader = ConfigReader(schema: [
    "serial": .option, "gpsd": .optionalValue(fallback: "localhost:2947"), "all": .flag, "background": .flag,
    "header": .list, "distance-filter": .option,
])

/// `ConfigReader.parse` on any bytes: never a crash (no deep recursion, no alias blow-up), a
/// rejection is a `ConfigFileError` with a message; settings it accepts survive the encoder:
/// parse → yaml → parse gives the same keys and values.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let settings: [ConfigSetting]
    do throws(ConfigFileError) {
        settings = try reader.parse(bytes, name: "fuzz.yaml")
    } catch {
        precondition(!error.message.isEmpty, "a rejection without a message")
        return 0
    }
    let yaml = ConfigReader.yaml(settings)
    let again: [ConfigSetting]
    do throws(ConfigFileError) {
        again = try reader.parse(Array(yaml.utf8), name: "again.yaml")
    } catch {
        preconditionFailure("accepted settings, written as YAML, are refused: \(error)\n\(yaml)")
    }
    precondition(again.map(\.key) == settings.map(\.key), "the keys changed in the round trip")
    precondition(
        again.map(\.value.withoutLines) == settings.map(\.value.withoutLines),
        "a value changed in the round trip\n\(yaml)")
    return 0
}

extension ConfigSetting.Value {
    /// The value without the lines of list items (the encoder writes its own layout).
    var withoutLines: ConfigSetting.Value {
        guard case .list(let items) = self else { return self }
        return .list(items.map { .init(value: $0.value, line: 0) })
    }
}
