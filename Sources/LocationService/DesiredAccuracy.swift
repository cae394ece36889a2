import Geo

/// How accurate delivered locations must be, as CoreLocation's `desiredAccuracy` names it.
///
/// Exactly what each does (``StandardUpdateFilter``):
///
/// | value | a fix qualifies when its horizontal accuracy is |
/// |---|---|
/// | `bestForNavigation` | known (any value): every fix is a candidate |
/// | `best` | ≤ 5 m |
/// | `tenMeters` | ≤ 10 m |
/// | `hundredMeters` | ≤ 100 m |
/// | `kilometer` | ≤ 1,000 m |
/// | `threeKilometers` | ≤ 3,000 m |
///
/// When no fix has qualified for ``StandardUpdateFilter/Configuration/accuracyFallback`` (30 s by
/// default) the most accurate fix seen in that time is delivered anyway, with its true accuracy,
/// as CoreLocation delivers what it has rather than nothing; the wait then starts again.
public enum DesiredAccuracy: String, CaseIterable, Sendable, Codable {
    case bestForNavigation = "best-for-navigation"
    case best
    case tenMeters = "10m"
    case hundredMeters = "100m"
    case kilometer = "1km"
    case threeKilometers = "3km"

    /// The largest accepted horizontal accuracy in metres.
    public var limit: Double {
        switch self {
        case .bestForNavigation: .infinity
        case .best: 5
        case .tenMeters: 10
        case .hundredMeters: 100
        case .kilometer: 1000
        case .threeKilometers: 3000
        }
    }
}
