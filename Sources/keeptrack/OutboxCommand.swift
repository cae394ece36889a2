import ArgumentParser
import Upload

#if canImport(Glibc)
import Glibc
#endif

/// `keeptrack outbox status | dead-letters | retry [--all|SEQ...] | purge`: the outbox in the data
/// directory (the logic is `Outbox`'s).
struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Look at the upload outbox; send dead letters again once the setting that got them refused is fixed.",
        discussion: """
            status: pending records, dead letters, evictions. dead-letters: one JSON object a line (seq, kind, \
            time, the endpoint's status and reason). retry --all or retry SEQ...: back into the outbox, sent \
            by the next replay or track with --upload. purge: delete the dead letters for good.
            """)

    @Argument(help: ArgumentHelp("status, dead-letters, retry or purge", valueName: "action"))
    var action: String

    @Argument(help: ArgumentHelp("With retry or purge: the dead letters' sequence numbers.", valueName: "seq"))
    var sequences: [Int64] = []

    @Flag(help: "With retry: every dead letter.")
    var all = false

    @OptionGroup var data: DataDirectoryOption

    func validate() throws {
        guard ["status", "dead-letters", "retry", "purge"].contains(action) else {
            throw ValidationError("the action is status, dead-letters, retry or purge, got '\(action)'.")
        }
        if action == "retry" && all == sequences.isEmpty { throw ValidationError("retry takes --all or sequence numbers.") }
    }

    func run() throws {
        let path = data.directory + "/outbox.sqlite"
        guard access(path, F_OK) == 0 else { throw ValidationError("no outbox at \(path) (see --data-dir).") }
        let outbox = try Outbox(path: path)
        switch action {
        case "status": print(try outbox.statusLine())
        case "dead-letters": for line in try outbox.deadLetterLines() { print(line) }
        case "retry": print("\(try outbox.retryDeadLetters(all ? nil : sequences)) dead letters back in the outbox")
        default: print("\(try outbox.purgeDeadLetters(sequences.isEmpty ? nil : sequences)) dead letters deleted")
        }
    }
}
