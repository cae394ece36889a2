extension TrailRecord.Kind {
    /// Whether the record is a position of the device: a location, or a heartbeat (the latest
    /// location again, at the time it was recorded again, while the device does not move). A
    /// heartbeat goes wherever a location goes: a plain position in OsmAnd, a location with trigger
    /// `p` (a ping) in OwnTracks, kind `heartbeat` in the JSON batch.
    public var isPosition: Bool { self == .location || self == .heartbeat }
}
