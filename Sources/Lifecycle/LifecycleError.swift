/// Lifecycle's error: a background policy that can't be used, what (``code``) and which
/// (``policy``, ``field``).
public struct LifecycleError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of problem.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// No policy has the name (``LifecycleError/policy``; ``LifecycleError/names`` are the ones there are).
        public static let unknownPolicy = Code(rawValue: "unknown-policy")
        /// A number of the policy can't be used (``LifecycleError/field``).
        public static let invalidPolicy = Code(rawValue: "invalid-policy")
    }

    /// A number of a ``BackgroundPolicy``.
    public enum Field: String, Hashable, Sendable, CaseIterable {
        case budget, warningLead, totalCap, grace, wakeWindow, fetchInterval
    }

    public var code: Code
    /// The policy's name as given (`custom` once overridden).
    public var policy: String
    /// The number that can't be used, for ``Code/invalidPolicy``.
    public var field: Field?
    /// The names that there are, for ``Code/unknownPolicy``.
    public var names: [String]

    public init(_ code: Code, policy: String, field: Field? = nil, names: [String] = []) {
        self.code = code
        self.policy = policy
        self.field = field
        self.names = names
    }

    /// What the field must be, in a sentence without its policy.
    public var requirement: String {
        switch field {
        case .budget?: "the budget must be a positive number of seconds"
        case .warningLead?: "the warning lead must be at least 0 and less than the budget"
        case .totalCap?: "the total cap must be at least the budget"
        case .grace?: "the grace period must be 0 or more seconds"
        case .wakeWindow?: "the wake window must be a positive number of seconds"
        case .fetchInterval?: "the fetch interval must be a positive number of seconds"
        case nil: "the policy can't be used"
        }
    }

    public var description: String {
        switch code {
        case .unknownPolicy:
            let list = names.dropLast().joined(separator: ", ") + (names.count > 1 ? " or " : "") + (names.last ?? "")
            return "no policy is named '\(policy)' (\(list))"
        default:
            return "\(policy == "custom" ? "Custom policy" : "Policy \(policy)"): \(requirement)."
        }
    }
}
