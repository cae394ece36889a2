import ArgumentParser
import Formats
import Lifecycle

/// The background-time policy: a named one, with optional overrides (any override makes it
/// `custom`).
struct PolicyOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "ios6 (600 s), ios7 (180 s) or ios13 (30 s). The default is ios7 (for simulate: all three).",
            valueName: "name"))
    var policy: String?

    @Option(
        help: ArgumentHelp("Custom: background time per stretch.", valueName: "duration"), transform: DurationText.parse
    )
    var budget: Double?

    @Option(
        help: ArgumentHelp("Custom: expiration handlers run this long before the end.", valueName: "duration"),
        transform: DurationText.parse)
    var warningLead: Double?

    @Option(help: ArgumentHelp("Custom: most task time per stretch ('none' for no cap).", valueName: "duration"))
    var totalCap: String?

    @Option(
        help: ArgumentHelp("Custom: an idle app runs this long in the background.", valueName: "duration"),
        transform: DurationText.parse)
    var grace: Double?

    @Option(
        help: ArgumentHelp("Custom: a wake runs a suspended app this long.", valueName: "duration"),
        transform: DurationText.parse)
    var wakeWindow: Double?

    /// The one policy named, with the overrides applied.
    func resolved() throws -> BackgroundPolicy { try policies()[0] }

    var isCustom: Bool { budget != nil || warningLead != nil || totalCap != nil || grace != nil || wakeWindow != nil }

    /// The policies named (`all` is every named one), with the overrides applied.
    func policies(allowAll: Bool = false, default name: String = "ios7") throws -> [BackgroundPolicy] {
        var totalCap: Double??
        if let text = self.totalCap {
            do {
                totalCap = .some(text == "none" ? nil : try DurationText.parse(text))
            } catch {
                throw ValidationError("--total-cap takes a duration or 'none': \(error).")
            }
        }
        // Overrides alone customise the default generation, not all of them.
        let name = policy ?? (isCustom ? "ios7" : name)
        guard BackgroundPolicy(named: name) != nil || (allowAll && name == "all") else {
            throw ValidationError("--policy must be ios6, ios7 or ios13\(allowAll ? " or all" : ""), got '\(name)'.")
        }
        do {
            return try BackgroundPolicy.resolve(
                name, allowAll: allowAll,
                overrides: .init(
                    budget: budget, warningLead: warningLead,
                    totalCap: totalCap, grace: grace, wakeWindow: wakeWindow))
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// The background-budget options of `replay` and `track`.
struct LifecycleOptions: ParsableArguments {
    @Flag(help: "Start in the background: the budget counts from the start (docs/background.md).")
    var background = false

    @Option(
        help: ArgumentHelp(
            "Declared background modes: location, audio, fetch, processing (comma-separated), or none.",
            valueName: "modes"))
    var backgroundModes: String = "location"

    @OptionGroup var policyOptions: PolicyOptions

    @Option(
        help: ArgumentHelp(
            "While suspended, take one fix this often for significant changes and regions. The default is 1m.",
            valueName: "duration"), transform: DurationText.parse)
    var sampleInterval: Double = 60

    /// Whether any option asks for the lifecycle to matter (it always runs; in the foreground it
    /// changes nothing until moved to the background).
    var isSet: Bool { background || policyOptions.policy != nil || policyOptions.isCustom }

    var modes: BackgroundModes { BackgroundModes(list: backgroundModes) ?? [] }

    func validate() throws {
        if BackgroundModes(list: backgroundModes) == nil {
            throw ValidationError(
                "--background-modes takes location, audio, fetch, processing (comma-separated) or "
                    + "none, got '\(backgroundModes)'.")
        }
        if !(sampleInterval > 0 && sampleInterval.isFinite) {
            throw ValidationError("--sample-interval must be more than 0s.")
        }
        _ = try policyOptions.resolved()
    }
}
