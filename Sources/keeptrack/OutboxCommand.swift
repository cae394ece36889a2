import ArgumentParser
import Formats
import Geo
import Upload

#if canImport(Glibc)
    import Glibc
#endif

/// `keeptrack outbox status | dead-letters | retry --all|SEQ... | purge [SEQ...]`.
struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Show the upload outbox, send what waits in it, send its dead letters again or delete them.",
        discussion: """
            Examples:
              keeptrack outbox status            # pending, dead letters (by target)
              keeptrack outbox send              # to the targets of track's config file
              keeptrack outbox dead-letters      # one JSON object a line
              keeptrack outbox retry --all       # send them again (once fixed)
              keeptrack outbox retry --all --target fleet:5055/
              keeptrack outbox purge 12 13       # delete these for good
              keeptrack outbox forget-target old.example/v1
            """,
        subcommands: [Status.self, Send.self, DeadLetters.self, Retry.self, Purge.self, ForgetTarget.self]
    )

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "The device, records pending, dead letters, evicted, the last sequence number; then a line a "
                + "target when there are several (or one the last run left).")
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let outbox = try data.existingOutbox()
            let s = try outbox.stats()
            var line = "outbox \(outbox.path): device \(outbox.device), \(s.pending) pending"
            if let oldest = s.oldestAppended { line += " (oldest appended \(ISOTime.string(oldest)))" }
            line += ", \(s.deadLetters) dead letters, \(s.evicted) evicted by the caps, last sequence \(s.lastSequence)"
            print(line)
            // With several targets (or a target the last run left), a line each.
            let targets = try outbox.targetStatuses()
            guard targets.count > 1 || targets.contains(where: { !$0.inLatestRun }) else { return }
            for t in targets {
                var line =
                    "  target \(t.target.name) (\(t.target.url)): \(t.pending) pending, \(t.deadLetters) dead letters"
                if let success = t.lastSuccess { line += ", last success \(ISOTime.string(success))" }
                if let error = t.lastError { line += ", last error: \(error)" }
                if !t.inLatestRun {
                    line +=
                        "; orphaned: not in the last run (its records leave once the others have them; "
                        + "keeptrack outbox forget-target \(t.target.name))"
                }
                print(line)
            }
        }
    }

    struct DeadLetters: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "dead-letters",
            abstract: "The dead letters, one JSON object a line (seq, kind, region, time, status, reason).")
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            for line in try data.existingOutbox().deadLetterLines() { print(line) }
        }
    }

    struct Retry: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move dead letters back into the outbox, to be sent with the next run or outbox send.")
        @Argument(help: "The dead letters' sequence numbers.") var sequences: [Int64] = []
        @Flag(help: "Every dead letter.") var all = false
        @Option(
            help: ArgumentHelp(
                "Only this target's dead letters (outbox status names the targets); they go "
                    + "to it alone.", valueName: "name"))
        var target: String?
        @OptionGroup var data: DataDirectoryOption

        func validate() throws {
            if all == !sequences.isEmpty { throw ValidationError("retry takes --all or sequence numbers") }
        }

        func run() throws {
            let moved = try data.existingOutbox().retryDeadLetters(all ? nil : sequences, target: target)
            print("\(moved) dead letters back in the outbox")
        }
    }

    struct Purge: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete dead letters for good (all of them without SEQ).")
        @Argument(help: "The dead letters' sequence numbers.") var sequences: [Int64] = []
        @Option(help: ArgumentHelp("Only this target's dead letters.", valueName: "name")) var target: String?
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let deleted = try data.existingOutbox().purgeDeadLetters(
                sequences.isEmpty ? nil : sequences, target: target)
            print("\(deleted) dead letters deleted")
        }
    }

    struct ForgetTarget: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "forget-target",
            abstract: "Stop tracking a target removed from the settings: its dead letters go, and records only it "
                + "lacked leave the outbox.")
        @Argument(help: "The target's name, as outbox status shows it.") var name: String
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let (known, released) = try data.existingOutbox().forgetTarget(name)
            guard known else {
                throw CommandFailure("the outbox knows no target '\(name)' (see keeptrack outbox status)")
            }
            print("forgot target \(name); \(released) records only it lacked left the outbox")
        }
    }
}

extension DataDirectoryOption {
    /// The outbox of the data directory, which must exist.
    func existingOutbox() throws -> Outbox {
        let path = layout.outbox
        guard access(path, F_OK) == 0 else { throw CommandFailure("no outbox at \(path) (see --data-dir)") }
        return try Outbox(path: path)
    }
}

/// A failure at run time (not an argument a user can change): printed as `Error: MESSAGE`, exit
/// status 1, no usage text.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) { self.description = description }
}
