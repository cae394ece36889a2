/// The endpoint's storage: one protocol per facet, and a store is all of them. `TrackServer`
/// speaks to a store only through this protocol; ``SQLiteTrackStore`` (one file, the default) and
/// the PostgreSQL store (`TrackStorePostgres`) implement every facet, and the same endpoint tests
/// run on both.
///
/// The facets, each a protocol in a file of its own and an extension in a file of its own on each
/// store (`SQLiteTrackStore+NAME.swift`, `PostgresTrackStore+NAME.swift`):
/// - ``RecordStore``: records, idempotent by key, and each device's summary.
/// - ``StoredRecordsSource``: what was stored, batch by batch, for the live stream.
/// - ``CredentialStore``: device tokens, kept as digests.
/// - ``FleetStore``: each device's latest position, positions by area.
/// - ``RetentionStore``: old points deleted in bounded batches.
/// - ``DeviceSecretStore``: OwnTracks devices' encryption secrets.
/// - ``StopStore``: stops and trips, kept at ingest.
/// - ``EventStore``: geofences, events, hooks and their delivery queue.
/// - ``StatisticsStore``: statistics by quarter hour, kept from the stops and trips.
/// - ``PlaceNameStore``: the reverse geocoder's names, by cell.
/// - ``ShareStore``: share links, kept as digests.
/// - ``HomeAssistantStore``: how far the Home Assistant relay got with each device.
///
/// A new facet (events, geofences, statistics...) is a protocol beside these, added to the list
/// this protocol inherits, so that neither store builds without it.
public protocol TrackStore: Sendable, RecordStore, StoredRecordsSource, CredentialStore, FleetStore, RetentionStore,
    DeviceSecretStore, StopStore, EventStore, StatisticsStore, PlaceNameStore, ShareStore, HomeAssistantStore
{
    /// Where the store is, for people: a file's path, or a URL without its password.
    var location: String { get }

    /// Releases the store's connections; a store is not used after it.
    func close() async
}

extension TrackStore {
    public func close() async {}
}
