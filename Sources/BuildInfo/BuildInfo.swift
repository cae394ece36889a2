/// The version and the git commit this binary was built from, written at build time by
/// `Plugins/BuildInfoPlugin` (the `VERSION` file and `git rev-parse`; `-dirty` when the tree had
/// uncommitted changes, `unknown` outside a git checkout unless `KEEPTRACK_COMMIT` is set).
public enum BuildInfo {
    /// The release version, from the `VERSION` file (`0.1.0`).
    public static let version = generatedVersion
    /// The abbreviated git commit (12 hex digits), `-dirty` when built with uncommitted changes.
    public static let commit = generatedCommit
    /// What `keeptrack --version` prints: `0.1.0 (commit 1234abcd5678)`.
    public static var line: String { "\(version) (commit \(commit))" }
}
