import ArgumentParser
import Upload

/// `keeptrack outbox status | dead-letters | retry --all|SEQ... | purge [SEQ...]` (`Outbox.command`).
struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "outbox", abstract: "Show the upload outbox; send its dead letters again (retry --all|SEQ...) or delete them (purge).")
    @Argument(help: "status, dead-letters, retry or purge") var action: String
    @Argument(help: "retry, purge: the dead letters' sequence numbers") var sequences: [Int64] = []
    @Flag(help: "retry: every dead letter") var all = false
    @OptionGroup var data: DataDirectoryOption
    func run() throws { for line in try Outbox.command(action, sequences: sequences, all: all, directory: data.directory) { print(line) } }
}
