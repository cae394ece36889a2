/// How much background time an app gets and how it is counted: the rules of one iOS generation,
/// or custom ones.
///
/// | policy  | budget | warning lead | total cap | grace | wake window |
/// |---------|--------|--------------|-----------|-------|-------------|
/// | `ios6`  | 600 s  | 5 s          | 600 s     | 5 s   | 10 s        |
/// | `ios7`  | 180 s  | 5 s          | 600 s     | 5 s   | 10 s        |
/// | `ios13` | 30 s   | 5 s          | none      | 5 s   | 10 s        |
public struct BackgroundPolicy: Hashable, Sendable, CustomStringConvertible {
    /// `ios6`, `ios7`, `ios13` or `custom`.
    public var name: String
    /// Background time a stretch in the background starts with (`backgroundTimeRemaining` right
    /// after entering the background or a location refresh).
    public var budget: Double
    /// How long before the budget runs out the expiration handlers run. The default is 5 s.
    public var warningLead: Double
    /// The most background time tasks can get in one stretch, however they are begun and whatever
    /// wakes happen in between; `nil` for no cap. Only a keep-alive refresh (a delivered location
    /// with the location mode) starts a new stretch.
    public var totalCap: Double?
    /// How long an app with no open task and no keep-alive keeps running after it became so
    /// (entered the background, ended its last task, stopped its keep-alive). The default is 5 s.
    public var grace: Double
    /// How long a significant change, a region event or a background fetch lets a suspended app
    /// run. The default is 10 s.
    public var wakeWindow: Double
    /// With the `fetch` mode, how often a suspended app is woken to fetch. The default is 900 s,
    /// the earliest iOS schedules a background refresh.
    public var fetchInterval: Double = 900

    public init(
        name: String = "custom", budget: Double, warningLead: Double = 5, totalCap: Double? = nil,
        grace: Double = 5, wakeWindow: Double = 10
    ) {
        self.name = name
        self.budget = budget
        self.warningLead = warningLead
        self.totalCap = totalCap
        self.grace = grace
        self.wakeWindow = wakeWindow
    }

    /// iOS 6: ten minutes, and never more than ten minutes in all.
    public static let ios6 = BackgroundPolicy(name: "ios6", budget: 600, totalCap: 600)
    /// iOS 7 to 12 (the default): three minutes, ten minutes in all however tasks are restarted.
    public static let ios7 = BackgroundPolicy(name: "ios7", budget: 180, totalCap: 600)
    /// iOS 13 and later: about thirty seconds.
    public static let ios13 = BackgroundPolicy(name: "ios13", budget: 30)

    /// The named policies, in order.
    public static let named: [BackgroundPolicy] = [.ios6, .ios7, .ios13]

    /// The policy called `name` (`ios6`, `ios7`, `ios13`), or `nil`.
    public init?(named name: String) {
        guard let p = Self.named.first(where: { $0.name == name }) else { return nil }
        self = p
    }

    /// Overrides of a named policy's numbers: any of them makes it a `custom` policy.
    public struct Overrides: Hashable, Sendable {
        public var budget: Double?
        public var warningLead: Double?
        /// `.some(nil)`: no cap.
        public var totalCap: Double??
        public var grace: Double?
        public var wakeWindow: Double?

        public init(
            budget: Double? = nil, warningLead: Double? = nil, totalCap: Double?? = nil, grace: Double? = nil,
            wakeWindow: Double? = nil
        ) {
            self.budget = budget
            self.warningLead = warningLead
            self.totalCap = totalCap
            self.grace = grace
            self.wakeWindow = wakeWindow
        }

        /// Whether any number is overridden.
        public var isEmpty: Bool { self == Overrides() }
    }

    /// This policy with `overrides` applied (named `custom` when there are any).
    ///
    /// - Throws: ``LifecycleError`` saying which number can't be used (``problem``).
    public func applying(_ overrides: Overrides) throws(LifecycleError) -> BackgroundPolicy {
        guard !overrides.isEmpty else { return self }
        var p = self
        p.name = "custom"
        if let v = overrides.budget { p.budget = v }
        if let v = overrides.warningLead { p.warningLead = v }
        if let v = overrides.totalCap { p.totalCap = v }
        if let v = overrides.grace { p.grace = v }
        if let v = overrides.wakeWindow { p.wakeWindow = v }
        if let problem = p.problem { throw problem }
        return p
    }

    /// The policies `name` stands for (`all`, when `allowAll`, is every named one), each with
    /// `overrides` applied: what `--policy NAME --budget ...` means.
    ///
    /// - Throws: ``LifecycleError``: an unknown name, or numbers that can't be used.
    public static func resolve(_ name: String, allowAll: Bool = false, overrides: Overrides) throws(LifecycleError)
        -> [BackgroundPolicy]
    {
        let base: [BackgroundPolicy]
        if allowAll && name == "all" {
            base = named
        } else if let p = BackgroundPolicy(named: name) {
            base = [p]
        } else {
            throw LifecycleError(
                .unknownPolicy, policy: name, names: ["ios6", "ios7", "ios13"] + (allowAll ? ["all"] : []))
        }
        var out: [BackgroundPolicy] = []
        for p in base { out.append(try p.applying(overrides)) }
        return out
    }

    /// Why the numbers can't be used (``LifecycleError/Code/invalidPolicy``, naming the field), or
    /// `nil` when they can.
    public var problem: LifecycleError? {
        func bad(_ v: Double) -> Bool { !(v >= 0 && v.isFinite) }
        let field: LifecycleError.Field? =
            if bad(budget) || budget == 0 { .budget } else if bad(warningLead) || warningLead >= budget {
                .warningLead
            } else if let cap = totalCap, bad(cap) || cap < budget { .totalCap } else if bad(grace) {
                .grace
            } else if bad(wakeWindow) || wakeWindow == 0 {
                .wakeWindow
            } else if bad(fetchInterval) || fetchInterval == 0 { .fetchInterval } else { nil }
        return field.map { LifecycleError(.invalidPolicy, policy: name, field: $0) }
    }

    public var description: String {
        "\(name): budget \(seconds(budget)), warning \(seconds(warningLead)) before, "
            + "cap \(totalCap.map(seconds) ?? "none"), grace \(seconds(grace)), wake \(seconds(wakeWindow))"
    }
}

/// Renders seconds without a needless fraction: `180 s`, `2.5 s`.
func seconds(_ s: Double) -> String {
    s == s.rounded() && abs(s) < 1e15 ? "\(Int(s)) s" : "\(s) s"
}

/// The background modes an app declares (Info.plist's `UIBackgroundModes`).
///
/// Only `location` and `audio` keep an app running; `fetch` wakes a suspended app every
/// ``BackgroundPolicy/fetchInterval``. `processing` (BGProcessingTask: runs while charging and
/// idle) is accepted so a configuration can declare it, and changes nothing here.
public struct BackgroundModes: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Delivered locations refresh the budget while standard updates run.
    public static let location = BackgroundModes(rawValue: 1 << 0)
    /// Continuous playback keeps the app running.
    public static let audio = BackgroundModes(rawValue: 1 << 1)
    /// Periodic wakes to fetch.
    public static let fetch = BackgroundModes(rawValue: 1 << 2)
    /// Declared only (see the type's documentation).
    public static let processing = BackgroundModes(rawValue: 1 << 3)

    static let names: [(String, BackgroundModes)] = [
        ("location", .location), ("audio", .audio), ("fetch", .fetch), ("processing", .processing),
    ]

    /// Parses a comma-separated list (`location,fetch`); `none` or an empty string is no mode.
    public init?(list: String) {
        self = []
        if list == "none" || list.isEmpty { return }
        for part in list.split(separator: ",") {
            guard let m = Self.names.first(where: { $0.0 == part })?.1 else { return nil }
            insert(m)
        }
    }

    /// The names of the modes in the set, in a fixed order.
    public var names: [String] { Self.names.filter { contains($0.1) }.map(\.0) }

    public var description: String { isEmpty ? "none" : names.joined(separator: ",") }
}
