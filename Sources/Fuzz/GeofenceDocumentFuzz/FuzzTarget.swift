import EndpointEvents

/// `GeofenceDocument.parse` on any bytes, with small limits so that the bounds are reached too:
/// never a crash; a rejection is an `EventsError` that says something; what it accepts is within
/// the limits, named uniquely, and written back by `geoJSON` as a document that reads back equal.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var limits = GeofenceDocument.Limits()
    limits.geofences = 8
    limits.verticesPerPolygon = 64
    limits.vertices = 200
    limits.devicesPerGeofence = 4
    let geofences: [Geofence]
    do throws(EventsError) {
        geofences = try GeofenceDocument.parse(bytes, limits: limits)
    } catch {
        precondition(!error.description.isEmpty, "a rejection that says nothing")
        if error.code == .invalidGeofences {
            precondition(!error.failures.isEmpty, "invalid geofences without one named")
            precondition(error.failures.allSatisfy { $0.feature != nil }, "an invalid geofence without its feature")
        }
        return 0
    }
    precondition(geofences.count <= limits.geofences, "more geofences than the limit")
    precondition(Set(geofences.map(\.name)).count == geofences.count, "two geofences with one name")
    for g in geofences {
        precondition(!g.name.isEmpty, "a geofence without a name")
        if let devices = g.devices { precondition(!devices.isEmpty && devices.count <= 4, "devices out of bounds") }
    }
    let written = GeofenceDocument.geoJSON(geofences)
    guard let again = try? GeofenceDocument.parse(written) else {
        preconditionFailure("the document written back does not read: \(String(decoding: written, as: UTF8.self))")
    }
    precondition(again == geofences, "the document written back reads differently")
    return 0
}
