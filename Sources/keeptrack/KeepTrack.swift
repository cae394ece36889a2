import ArgumentParser

@main
struct KeepTrack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keeptrack",
        abstract: "GPS tracking for Linux: decode NMEA logs, turn fixes into location events, upload trails.",
        discussion: """
            Start with a recorded log:

              keeptrack decode fixtures/walk-15min.nmea          # one JSON object per fix
              keeptrack decode --format gpx log.nmea > log.gpx    # a GPX track

            Every subcommand has its own --help.
            """,
        subcommands: [Decode.self]
    )
}
