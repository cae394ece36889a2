/// The Home Assistant facet of a store: how far the endpoint's Home Assistant relay (`keeptrack serve
/// --homeassistant`) got with each device, kept in the store so that a restart or a broker outage
/// resumes where it stopped, with nothing lost and nothing sent again.
///
/// A cursor is the time (seconds since 1970) of the last position of a device the broker
/// acknowledged for one broker, `target` (its address and discovery prefix): the relay publishes the
/// device's positions after it, in the trail's order.
public protocol HomeAssistantStore: AnyObject {
    /// Every device's cursor for `target`, by device id (devices never published are left out).
    func homeAssistantCursors(target: String) async throws -> [String: Double]

    /// Sets the cursors of the devices in `cursors` for `target` (other devices' stay), in one transaction.
    func setHomeAssistantCursors(_ cursors: [String: Double], target: String) async throws
}
