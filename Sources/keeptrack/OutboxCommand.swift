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
        abstract: "Show the upload outbox; send its dead letters again or delete them.",
        discussion: """
            Examples:
              keeptrack outbox status            # pending, dead letters
              keeptrack outbox dead-letters      # one JSON object a line
              keeptrack outbox retry --all       # send them again (once fixed)
              keeptrack outbox purge 12 13       # delete these for good
            """,
        subcommands: [Status.self, DeadLetters.self, Retry.self, Purge.self]
    )

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One line: the device, records pending, dead letters, evicted, the last sequence number.")
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let outbox = try data.existingOutbox()
            let s = try outbox.stats()
            var line = "outbox \(outbox.path): device \(outbox.device), \(s.pending) pending"
            if let oldest = s.oldestAppended { line += " (oldest appended \(ISOTime.string(oldest)))" }
            line += ", \(s.deadLetters) dead letters, \(s.evicted) evicted by the caps, last sequence \(s.lastSequence)"
            print(line)
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
            abstract: "Move dead letters back into the outbox, to be sent with the next run.")
        @Argument(help: "The dead letters' sequence numbers.") var sequences: [Int64] = []
        @Flag(help: "Every dead letter.") var all = false
        @OptionGroup var data: DataDirectoryOption

        func validate() throws {
            if all == !sequences.isEmpty { throw ValidationError("retry takes --all or sequence numbers") }
        }

        func run() throws {
            let moved = try data.existingOutbox().retryDeadLetters(all ? nil : sequences)
            print("\(moved) dead letters back in the outbox")
        }
    }

    struct Purge: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete dead letters for good (all of them without SEQ).")
        @Argument(help: "The dead letters' sequence numbers.") var sequences: [Int64] = []
        @OptionGroup var data: DataDirectoryOption

        func run() throws {
            let deleted = try data.existingOutbox().purgeDeadLetters(sequences.isEmpty ? nil : sequences)
            print("\(deleted) dead letters deleted")
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
