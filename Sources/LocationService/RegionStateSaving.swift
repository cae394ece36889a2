/// When a tracker saves its regions' states: after they change, at most once per ``interval``
/// seconds, and once more at the end if changes are left unsaved.
///
/// A value type with no I/O and no clock: the owner asks ``shouldSave(version:at:)`` after each
/// event with ``RegionMonitor/insideVersion`` and the time, and saves when told to. A burst of
/// transitions (a million first states at start) is one save, not one per event, and what a save
/// writes is O(regions inside), so persistence never costs O(all regions) per event.
public struct RegionStateSaving: Sendable {
    /// The least time between two saves, in seconds. The default is 1.
    public var interval: Double
    private var savedVersion: UInt64
    private var lastSave = -Double.infinity

    /// - Parameters:
    ///   - version: the monitor's ``RegionMonitor/insideVersion`` as loaded (already saved).
    ///   - interval: the least time between two saves, in seconds.
    public init(version: UInt64, interval: Double = 1) {
        savedVersion = version
        self.interval = interval
    }

    /// Whether to save now, given the monitor's version and the time; when `true`, the state counts
    /// as saved.
    public mutating func shouldSave(version: UInt64, at now: Double) -> Bool {
        guard version != savedVersion, now - lastSave >= interval || now < lastSave else { return false }
        savedVersion = version
        lastSave = now
        return true
    }

    /// Whether changes are left unsaved (at the end of a run); when `true`, they count as saved.
    public mutating func shouldSaveAtEnd(version: UInt64) -> Bool {
        guard version != savedVersion else { return false }
        savedVersion = version
        return true
    }
}
