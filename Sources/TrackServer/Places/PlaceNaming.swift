import Geo
import TrackStore

/// A visit's name (docs/endpoint.md, "Place names"): the user's own area that contains it first (a
/// store that keeps areas: ``PlaceAreaSource``), else the reverse geocoder's name for its cell when a
/// geocoder is configured and has answered (a cell not answered yet is handed to it, in the
/// background), else none. Without a geocoder no name comes from the cache and none is asked.
struct PlaceNaming: Sendable {
    let store: any TrackStore
    let geocoder: ReverseGeocoder?

    /// The name of each of `coordinates` (`nil`: none yet), for `device`.
    func names(device: String, of coordinates: [Coordinate]) async throws -> [String?] {
        guard !coordinates.isEmpty else { return [] }
        var out = [String?](repeating: nil, count: coordinates.count)
        if let areas = store as? any PlaceAreaSource {
            let found = try await areas.areaNames(device: device, containing: coordinates)
            for (i, names) in found.prefix(out.count).enumerated() { out[i] = names.first }
        }
        guard let geocoder else { return out }
        let missing = out.indices.filter { out[$0] == nil }
        let cells = missing.map { PlaceCell(coordinates[$0]) }
        let cached = try await store.placeNames(cells)
        for (i, cell) in zip(missing, cells) {
            if let answered = cached[cell] {
                out[i] = answered
            } else {
                geocoder.ask(device: device, coordinates[i])
            }
        }
        return out
    }
}
