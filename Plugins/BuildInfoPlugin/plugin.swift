import Foundation
import PackagePlugin

/// Writes the version (the `VERSION` file) and the git commit into a generated Swift source of the
/// target that uses it, before every build (`tools/build-info`: rewritten only when it changes).
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let root = context.package.directoryURL
        return [
            .prebuildCommand(
                displayName: "Version and git commit for \(target.name)",
                executable: URL(filePath: "/bin/sh"),
                arguments: [root.appending(path: "tools/build-info").path, root.path, output.path],
                outputFilesDirectory: output)
        ]
    }
}
