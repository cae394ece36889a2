import Dispatch
import Foundation

/// What a command run to its end left: its exit status and what it wrote.
public struct CommandResult: Sendable {
    public var status: Int32
    public var stdout: Data
    public var stderr: Data

    /// Standard output as text.
    public var output: String { String(decoding: stdout, as: UTF8.self) }
    /// Standard error as text.
    public var errors: String { String(decoding: stderr, as: UTF8.self) }
}

/// Runs `executable` to its end and returns what it wrote: `stdin` fed and standard error read on
/// threads of their own (not Dispatch's workers, see ``offThePool(_:)``) and both outputs read to
/// their ends before the wait, so a child that writes much or reads while it writes never blocks
/// on a pipe. Blocking: call it off Swift's cooperative pool (a test with the
/// ``OffThePool`` trait), or ``runCommandOffThePool(_:_:stdin:environment:directory:)`` from an async
/// test.
public func runCommand(
    _ executable: URL, _ arguments: [String], stdin: Data? = nil, environment: [String: String]? = nil,
    directory: URL = packageRoot
) throws -> CommandResult {
    expectOffThePool("running \(executable.lastPathComponent)")
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    process.currentDirectoryURL = directory
    let out = Pipe(), err = Pipe(), input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = stdin == nil ? FileHandle.nullDevice : input
    try process.run()
    let done = DispatchSemaphore(value: 0)
    var helpers = 1
    if let stdin {
        helpers += 1
        let writer = input.fileHandleForWriting
        Thread.detachNewThread {
            writer.write(stdin)
            try? writer.close()
            done.signal()
        }
    }
    nonisolated(unsafe) var errors = Data()
    Thread.detachNewThread {
        errors = err.fileHandleForReading.readDataToEndOfFile()
        done.signal()
    }
    let output = out.fileHandleForReading.readDataToEndOfFile()
    for _ in 0..<helpers { done.wait() }
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: output, stderr: errors)
}

/// ``runCommand(_:_:stdin:environment:directory:)`` on a thread of its own, for an async test.
public func runCommandOffThePool(
    _ executable: URL, _ arguments: [String], stdin: Data? = nil, environment: [String: String]? = nil,
    directory: URL = packageRoot
) async throws -> CommandResult {
    try await offThePool {
        try runCommand(executable, arguments, stdin: stdin, environment: environment, directory: directory)
    }
}
