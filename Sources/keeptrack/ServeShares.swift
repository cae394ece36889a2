import ArgumentParser
import Formats
import FoundationEssentials
import Geo
import TrackStore

extension Serve {
    /// `keeptrack serve share add DEVICE --expires 2h [--from T --to T] | list | remove ID`, on serve's
    /// `--db` (or the data directory's).
    struct Shares: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Share links in serve's --db: a read-only live map of one device, until it expires.",
            discussion: """
                A link /s/TOKEN opens the map of that one device without any other credential (within \
                --from and --to, when given), until it expires or is removed; its token is 128 random bits, \
                printed once and stored hashed.

                Examples:
                  keeptrack serve share add van1 --expires 2h   # prints /s/TOKEN
                  keeptrack serve share add van1 --expires 7d --from 2026-05-01T00:00:00Z
                  keeptrack serve share list    # ID, device, expiry, state, window
                  keeptrack serve share remove ID
                  keeptrack serve share list --db postgres://kt@db/keeptrack  # serve's store
                """,
            subcommands: [Add.self, List.self, Remove.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Make a share link of a device and print its path /s/TOKEN: the only time it is shown.")
            @Argument(help: "The device id.") var device: String
            // Unconditional: `--expires -5m` is its value (refused by run()), not a missing one.
            @Option(
                parsing: .unconditional,
                help: ArgumentHelp(
                    "How long the link works (90, 5m, 2h, 30d; at most 366d), or until an ISO 8601 time.",
                    valueName: "duration|time"))
            var expires: String
            @Option(help: ArgumentHelp("Show nothing before this time (ISO 8601 or Unix seconds).", valueName: "time"))
            var from: String?
            @Option(help: ArgumentHelp("Show nothing after this time (ISO 8601 or Unix seconds).", valueName: "time"))
            var to: String?
            @ParentCommand var serve: Serve

            static func time(_ option: String, _ text: String?) throws -> Double? {
                guard let text else { return nil }
                guard let t = ISOTime.parse(text) ?? Double(text), t.isFinite else {
                    throw ValidationError("--\(option): '\(text)' is neither ISO 8601 UTC nor Unix seconds.")
                }
                return t
            }

            func run() async throws {
                let now = WallClock().now.secondsSince1970
                let until: Double
                if let t = ISOTime.parse(expires) {
                    until = t
                } else if let seconds = try? DurationText.seconds(expires) {
                    until = now + seconds
                } else {
                    throw ValidationError(
                        "--expires: '\(expires)' is neither a duration (2h, 30d) nor an ISO 8601 time.")
                }
                let (from, to) = (try Self.time("from", from), try Self.time("to", to))
                let made: (share: Share, token: String)
                do {
                    made = try await serve.withDeviceTokens(creating: false) { store in
                        // Known by its points, or by a token of its own (set up, nothing sent yet).
                        let known = try await store.device(device) != nil
                        let hasToken = try await store.credentials().contains { $0.device == device }
                        guard known || hasToken else {
                            throw CommandFailure(
                                "no device '\(device)' in \(store.location): it has sent nothing yet and has no token")
                        }
                        return try await store.addShare(device: device, expires: until, from: from, to: to, now: now)
                    }
                } catch let error as TrackStoreError where error.code == .invalidShare {
                    throw ValidationError(Self.sentence(error.message))
                }
                print("/s/\(made.token)")
                printError("share \(made.share.id) of \(device), until \(ISOTime.string(made.share.expires))")
            }

            /// The option a store's message names (`expires: ...` is `--expires: ...`).
            static func sentence(_ message: String) -> String { "--" + message + "." }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "The share links, one a line: ID<TAB>device<TAB>expires<TAB>state (active, expired, revoked)"
                    + "<TAB>from<TAB>to (its window, - for none)."
            )
            @ParentCommand var serve: Serve

            func run() async throws {
                let shares = try await serve.withDeviceTokens(creating: false) { try await $0.shares(device: nil) }
                let now = WallClock().now.secondsSince1970
                for s in shares {
                    let window = [s.from, s.to].map { $0.map(ISOTime.string) ?? "-" }.joined(separator: "\t")
                    print("\(s.id)\t\(s.device)\t\(ISOTime.string(s.expires))\t\(s.state(at: now).rawValue)\t\(window)")
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Revoke a share link at once: it then answers 410.")
            @Argument(help: "The share's id (from add or list); one beginning with - goes last, after --.")
            var id: String
            @ParentCommand var serve: Serve

            func run() async throws {
                let now = WallClock().now.secondsSince1970
                let (share, location) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.revokeShare(id: id, at: now), store.location)
                }
                guard let share else { throw CommandFailure("no share '\(id)' in \(location)") }
                if let revoked = share.revoked, revoked < now {
                    print("\(id) was revoked already, at \(ISOTime.string(revoked))")
                } else {
                    print("removed \(id)")
                }
            }
        }
    }
}
