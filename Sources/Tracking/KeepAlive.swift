import Lifecycle
import LocationService

/// The rules that connect the location service to the app's lifecycle, written once
/// (docs/background.md; `AppLifecycle`'s rules 6 and 8). ``Tracker`` applies them to every event it
/// delivers, live or replayed, and `keeptrack simulate` runs the same tracker:
/// - a delivered location refreshes the background budget (with the `location` mode);
/// - standard updates pausing while stationary, or resuming, switch the location keep-alive off or on;
/// - a significant change, a region entry, exit or dwell, or a visit (its arrival or departure) wakes a
///   suspended app, as iOS wakes an app for `didVisit`.
public enum KeepAlive {
    /// Gives `app` the lifecycle input `event` means.
    public static func apply(_ event: LocationEvent, to app: Application) {
        switch event {
        case .location: app.locationDelivered()
        case .paused: app.setLocationUpdates(active: false)
        case .resumed: app.setLocationUpdates(active: true)
        case .significantChange: if app.state == .suspended { app.wake(.significantChange) }
        case .region(.enter(let id, _), _), .region(.exit(let id, _), _), .region(.dwell(let id, _), _):
            if app.state == .suspended { app.wake(.region(id)) }
        case .visit: if app.state == .suspended { app.wake(.visit) }
        case .region(.state, _), .trip, .error: break
        }
    }
}
