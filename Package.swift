// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "KeepTrack",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "keeptrack", targets: ["keeptrack"]),
        .library(name: "Geo", targets: ["Geo"]),
        .library(name: "NMEA", targets: ["NMEA"]),
        .library(name: "Formats", targets: ["Formats"]),
        .library(name: "GPSInput", targets: ["GPSInput"]),
        .library(name: "LocationService", targets: ["LocationService"]),
        .library(name: "Lifecycle", targets: ["Lifecycle"]),
        .library(name: "MQTT", targets: ["MQTT"]),
        .library(name: "Upload", targets: ["Upload"]),
        .library(name: "TrackStore", targets: ["TrackStore"]),
        .library(name: "TrackServer", targets: ["TrackServer"]),
        .library(name: "TrackStorePostgres", targets: ["TrackStorePostgres"]),
        .library(name: "Tracking", targets: ["Tracking"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // FullFoundation alone of its default traits: nothing here uses swift-configuration through
        // it. With both, SwiftPM wrote the two -D flags in its process's hash order, and Hummingbird
        // was compiled again in about half of all builds (49 s each).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        // The live stream's WebSocket upgrade on `serve` (`GET /v1/stream`).
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // `swift package generate-documentation --target Tracking`: the DocC catalog (.ci/run builds it).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Vocabulary: coordinates, fixes, locations, geodesy. Imports no other target.
        .target(name: "Geo"),
        // zlib, for reading gzip-compressed NMEA logs.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),
        // Byte-level NMEA 0183: framing, checksums, sentences, epoch assembly.
        .target(name: "NMEA", dependencies: ["Geo", "CZlib"]),
        // libgps, the gpsd client library.
        .systemLibrary(name: "CGPS", path: "Sources/CGPS", pkgConfig: "libgps", providers: [.apt(["libgps-dev"])]),
        // Fix sources: gpsd (libgps), serial NMEA receivers, NMEA log replay.
        .target(name: "GPSInput", dependencies: ["Geo", "NMEA", "CGPS", "SystemIO", "TrackFiles"]),
        // The location service: standard updates, significant changes, regions (pure decisions).
        .target(name: "LocationService", dependencies: ["Geo", "Formats", "SystemIO"]),
        // The app lifecycle: states, background tasks and the budget (pure), systemd notification.
        .target(name: "Lifecycle", dependencies: ["Geo"]),
        // Wire and file formats, both directions: JSON Lines, CSV, GPX, GeoJSON, our JSON batch,
        // Traccar's OsmAnd, OwnTracks JSON; gzip bodies.
        .target(name: "Formats", dependencies: ["Geo", "CZlib"]),
        // libmosquitto, the MQTT client library, opened with dlopen at the first connection (its
        // header from libmosquitto-dev; at run time libmosquitto1).
        .target(name: "CMosquitto"),
        // MQTT over libmosquitto's threaded loop: broker URLs, one connection (QoS 1 publishes in
        // flight, PUBACKs, subscriptions).
        .target(name: "MQTT", dependencies: ["CMosquitto", "Geo", "SystemIO"]),
        // The durable outbox (GRDB over SQLite, WAL) and the uploader (async-http-client, or MQTT).
        .target(
            name: "Upload",
            dependencies: [
                "Geo", "Formats", "Lifecycle", "MQTT", "OwnTracksCrypto",
                // Home Assistant's discovery names the software version of the device (sw_version).
                "BuildInfo",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The endpoint's storage: the store protocol by facet (records, credentials, fleet, retention,
        // secrets, stops), its values, and the SQLite store (GRDB). No HTTP.
        .target(
            name: "TrackStore",
            dependencies: [
                "Geo", "Formats", "SystemIO", "LocationService", "OwnTracksCrypto", "EndpointEvents", "Digests",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The endpoint's HTTP side (Hummingbird) over the store protocol: route collections by concern
        // (ingest, trails and fleet, stops and trips, the Recorder API, the stream, the map,
        // administration), the map's assets as files, connection limits, the server's life.
        .target(
            name: "TrackServer",
            dependencies: [
                "TrackStore", "Geo", "Formats", "SystemIO", "MQTT", "LocationService", "BuildInfo", "OwnTracksCrypto",
                "EndpointEvents", "Delivery",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The request decoder the connection shedding's handler sits after (ConnectionActivity.swift).
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                // The reverse geocoder's requests (Places/ReverseGeocoder.swift).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            // The OpenAPI document as JSON and the map's page, script and style (templates, files as they
            // are), compiled in (`PackageResources.openapi_json`, `.map_html`...): served with no file to
            // find at run time, so the Debian package's binary serves them as a build does.
            resources: [
                .embedInCode("Resources/openapi.json"), .embedInCode("Resources/map.html"),
                .embedInCode("Resources/map.js"), .embedInCode("Resources/map.css"),
                .embedInCode("Resources/trails.html"), .embedInCode("Resources/captive-portal.html"),
                .embedInCode("Resources/share-refused.html"),
            ]
        ),
        // The endpoint's PostgreSQL + PostGIS store (postgres-nio), and the opener that picks the store a
        // `--db` value names: apart from TrackStore so that a SQLite-only embedder builds no PostgreSQL client.
        .target(
            name: "TrackStorePostgres",
            dependencies: [
                "TrackStore", "Formats", "Geo", "LocationService", "OwnTracksCrypto", "EndpointEvents",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // POSIX helpers without Foundation: wake pipes, threads, files, one-line Unix-socket servers.
        .target(name: "SystemIO"),
        // The tracker a program embeds: any fix source through the location service, the lifecycle's
        // reactions, the outbox and the uploader, events to a sink; one Service per part.
        .target(
            name: "Tracking",
            dependencies: [
                "Geo", "NMEA", "Formats", "LocationService", "Lifecycle", "Upload", "SystemIO", "MQTT", "BuildInfo",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .executableTarget(
            name: "keeptrack",
            dependencies: [
                "Geo", "NMEA", "Formats", "GPSInput", "LocationService", "Lifecycle", "Upload", "TrackServer",
                "Tracking",
                "TrackStore", "TrackStorePostgres", "SystemIO", "ConfigFile", "BuildInfo", "OwnTracksCrypto",
                "TrackFiles",
                "EndpointEvents", "Delivery",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Yams", package: "Yams"),
            ],
            // Linked by lld with packed relative relocations (DT_RELR, glibc 2.36+): the 60,000
            // relative relocations of a position-independent binary take 15 KB instead of 1.4 MB,
            // which the dynamic loader no longer reads at start (track --gpsd: 1.4 MB less resident,
            // 2.5 MB with the static runtime; tools/bench-track.py --memory). lld ships with the Swift
            // toolchain. The flags are the executable's own: a program that depends on the library
            // products does not link this target.
            linkerSettings: [
                .unsafeFlags(
                    ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                    .when(platforms: [.linux]))
            ]
        ),
        // The example of a program that embeds a tracker (docs/embedding.md), built and run by TrackingTests.
        .executableTarget(
            name: "embed-tracker",
            dependencies: [
                "Tracking", "GPSInput", "Upload",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/EmbedTracker"
        ),
        // What the benchmarks share: the monotonic clock, the malloc-counting preload library's count.
        .target(name: "BenchSupport", path: "Benchmarks/BenchSupport"),
        // Decoder throughput and allocation counts for tools/bench.py (not a test).
        .executableTarget(
            name: "nmea-bench", dependencies: ["NMEA", "Geo", "Formats", "BenchSupport"],
            path: "Benchmarks/NMEABench"),
        // Region monitoring cost by region count (not a test).
        .executableTarget(
            name: "regions-bench", dependencies: ["LocationService", "GPSInput", "NMEA", "Geo", "BenchSupport"],
            path: "Benchmarks/RegionsBench"),
        // The visit detector's cost per location (not a test).
        .executableTarget(
            name: "visits-bench", dependencies: ["LocationService", "GPSInput", "NMEA", "Geo", "BenchSupport"],
            path: "Benchmarks/VisitsBench"),
        // Outbox appends and upload throughput for tools/bench-upload.py (not a test).
        .executableTarget(name: "upload-bench", dependencies: ["Upload", "Formats"], path: "Benchmarks/UploadBench"),
        // libFuzzer target: swift build --sanitize=fuzzer --sanitize=address --product NMEAFuzz
        .executableTarget(name: "NMEAFuzz", dependencies: ["NMEA", "Geo"]),
        // Test support: package paths, fixtures, project tools, a real gpsd, a hang guard.
        .target(
            name: "KeepTrackTesting",
            dependencies: ["SystemIO", .product(name: "Logging", package: "swift-log")],
            path: "Sources/KeepTrackTesting"),
        // Test support: a real TrackServer on a free loopback port with its own database.
        // Its raw HTTP client (`Raw`) and the trails tests send (`walk`, `numbered`).
        .target(
            name: "TrackServerTesting",
            dependencies: [
                "TrackServer", "TrackStore", "TrackStorePostgres", "KeepTrackTesting", "Formats", "Geo",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]),
        .testTarget(name: "GeoTests", dependencies: ["Geo"], resources: [.copy("Resources")]),
        .testTarget(name: "NMEATests", dependencies: ["NMEA", "Geo", "KeepTrackTesting"]),
        .testTarget(
            name: "GPSInputTests",
            dependencies: ["GPSInput", "NMEA", "Geo", "SystemIO", "CGPS", "KeepTrackTesting", "TrackFiles"]),
        .testTarget(
            name: "LocationServiceTests",
            dependencies: ["LocationService", "Geo", "GPSInput", "Formats", "KeepTrackTesting"]),
        .testTarget(name: "LifecycleTests", dependencies: ["Lifecycle", "Geo", "KeepTrackTesting"]),
        .testTarget(name: "FormatsTests", dependencies: ["Formats", "NMEA", "Geo"]),
        // The uploader and the outbox, against real endpoints and brokers.
        .testTarget(
            name: "UploadTests",
            dependencies: [
                "Upload", "TrackServer", "TrackStore", "Formats", "Lifecycle", "Geo", "KeepTrackTesting",
                "TrackServerTesting",
                "OwnTracksCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The endpoint: routes, limits, connection shedding, live stream, map, both stores.
        .testTarget(
            name: "TrackServerTests",
            dependencies: [
                "TrackServer", "TrackStore", "TrackStorePostgres", "Formats", "Geo", "LocationService",
                "KeepTrackTesting",
                "TrackServerTesting", "EndpointEvents", "NMEA", "GPSInput", "Delivery",
                // PlaceNamesTests: a fake Nominatim on 127.0.0.1.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // ConnectionActivityHandlerTests: the pipeline fed byte by byte.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // ErrorAnswerTests: a store that fails, over a SQLite file it can break.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        // The PostgreSQL store, against the test process's own cluster.
        .testTarget(
            name: "TrackStorePostgresTests",
            dependencies: [
                "TrackStorePostgres", "TrackStore", "TrackServer", "Upload", "Formats", "Geo", "KeepTrackTesting",
                "TrackServerTesting", "OwnTracksCrypto", "EndpointEvents", "LocationService",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]),
        // docs/openapi.yaml against a real server: every route documented, every answer its schema; and
        // the JSON the server compiles in (Sources/TrackServer/Resources/openapi.json) the YAML's.
        .testTarget(
            name: "OpenAPITests",
            dependencies: [
                "TrackServer", "TrackStore", "TrackServerTesting", "KeepTrackTesting",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The test support itself: temporary directories, reserved ports, missing tools.
        .testTarget(name: "KeepTrackTestingTests", dependencies: ["KeepTrackTesting"]),
        .testTarget(
            name: "TrackingTests",
            dependencies: [
                "Tracking", "GPSInput", "NMEA", "TrackServer", "Upload", "Formats", "Lifecycle", "LocationService",
                "Geo",
                "KeepTrackTesting", "TrackServerTesting", "embed-tracker", "SystemIO",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "KeepTrackCLITests",
            dependencies: [
                "keeptrack", "KeepTrackTesting", "ConfigFile", "OwnTracksCrypto",
                // The options tables of docs/configuration.md are checked against the code's defaults, durations read as
                // DurationText reads them.
                "Formats",
                // The progress lines the command line says, from the counts of the tracker, the log source and
                // the store.
                "Tracking", "GPSInput", "TrackServer", "TrackStore",
            ],
            exclude: ["Golden"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The configuration file, read and checked (size, text, aliases, keys, values) apart from the
// command options it maps to: a library so that it can be fuzzed. Yams composes the document;
// libyaml's event parser (Debian's libyaml-dev, `CLibYAML`) bounds it in one pass before.
package.targets += [
    .systemLibrary(
        name: "CLibYAML", path: "Sources/CLibYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"])]),
    .target(name: "ConfigFile", dependencies: ["CLibYAML", .product(name: "Yams", package: "Yams")]),
    .testTarget(name: "ConfigFileTests", dependencies: ["ConfigFile", "Geo"]),
]

// libFuzzer targets, one per parser of untrusted bytes (docs/fuzzing.md):
// KEEPTRACK_FUZZ=1 swift build --scratch-path .build-fuzz --sanitize=fuzzer --sanitize=address --product NAME -Xswiftc -use-ld=lld -Xswiftc -O
package.targets += [
    ("JSONBatchFuzz", "Formats"), ("OsmAndFuzz", "Formats"), ("OwnTracksFuzz", "Formats"), ("ISOTimeFuzz", "Formats"),
    ("RegionsGeoJSONFuzz", "Formats"), ("ConfigFileFuzz", "ConfigFile"), ("RecorderTimeFuzz", "Formats"),
].map { name, library in
    .executableTarget(name: name, dependencies: [.target(name: library)], path: "Sources/Fuzz/\(name)")
}

// The version and git commit, written into a generated source before every build
// (Plugins/BuildInfoPlugin runs tools/build-info): `keeptrack --version`.
package.targets += [
    .plugin(name: "BuildInfoPlugin", capability: .buildTool()),
    .target(name: "BuildInfo", plugins: ["BuildInfoPlugin"]),
]

// OwnTracks' payload encryption (issue 29): libsodium's crypto_secretbox (XSalsa20-Poly1305) through a
// system library target (Debian libsodium-dev; at run time libsodium23), and the encrypted form over it,
// which the uploader (--secret-file) and the endpoint (per-device secrets) use. Its parsers' fuzz targets:
// the encrypted envelope, and Overland's batch (Dawarich).
package.targets += [
    .systemLibrary(
        name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
    .target(name: "OwnTracksCrypto", dependencies: ["CSodium", "Formats"]),
    // SHA-256 and HMAC-SHA-256 over the same libsodium: event ids, token digests, webhook signatures.
    .target(name: "Digests", dependencies: ["CSodium"]),
    .testTarget(name: "OwnTracksCryptoTests", dependencies: ["OwnTracksCrypto", "Formats"]),
    .executableTarget(
        name: "OwnTracksEnvelopeFuzz", dependencies: ["OwnTracksCrypto", "Formats"],
        path: "Sources/Fuzz/OwnTracksEnvelopeFuzz"),
    .executableTarget(name: "OverlandFuzz", dependencies: ["Formats"], path: "Sources/Fuzz/OverlandFuzz"),
]
// Track files as input (GPX, GeoJSON, CSV, OwnTracks .rec, Google Takeout): streaming byte readers
// giving fixes, below GPSInput, whose TrackFileSource replays them (docs/input-files.md).
package.targets +=
    [
        .target(name: "TrackFiles", dependencies: ["Geo", "NMEA"]),
        .testTarget(name: "TrackFilesTests", dependencies: ["TrackFiles", "NMEA", "Geo", "KeepTrackTesting"]),
    ]
    + ["GPXReaderFuzz", "JSONTrackReaderFuzz", "CSVReaderFuzz", "RecReaderFuzz"].map { name in
        // libFuzzer targets, one per reader (.ci/run).
        .executableTarget(name: name, dependencies: ["TrackReaderFuzzing", "TrackFiles"], path: "Sources/Fuzz/\(name)")
    } + [
        // The property they all check, once.
        .target(
            name: "TrackReaderFuzzing", dependencies: ["TrackFiles", "Geo"], path: "Sources/Fuzz/TrackReaderFuzzing")
    ]

// The WebSocket frames `serve` reads (/v1/stream, /ws/last): Hummingbird's upgrade channel and NIO's
// frame decoder as TrackServer+Stream.swift configures them, on a test channel (docs/fuzzing.md).
package.targets += [
    .executableTarget(
        name: "WebSocketFuzz",
        dependencies: [
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOWebSocket", package: "swift-nio"),
        ],
        path: "Sources/Fuzz/WebSocketFuzz")
]

// Events that reach people (issue 37): the event model, the pure evaluators (the endpoint's geofences by
// the device's own region rules, overspeed, low battery) and the geofence document (EndpointEvents);
// hooks and their delivery from a store's queue: webhooks (signed), Home Assistant, MQTT (Delivery).
package.targets += [
    .target(
        name: "EndpointEvents",
        dependencies: [
            "Geo", "Formats", "LocationService",
            // Event ids: SHA-256 of their cause (RFC 9562's name-based version 8).
            "Digests",
        ]),
    .target(
        name: "Delivery",
        dependencies: [
            "EndpointEvents", "Geo", "Formats", "MQTT", "Digests",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
    .testTarget(
        name: "EndpointEventsTests",
        dependencies: ["EndpointEvents", "LocationService", "Formats", "Geo", "NMEA", "KeepTrackTesting"]),
    .testTarget(
        name: "DeliveryTests",
        dependencies: [
            "Delivery", "EndpointEvents", "Geo", "MQTT", "KeepTrackTesting",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
    // Event evaluation per stored location by geofence count, beside the device's monitor (not a test).
    .executableTarget(
        name: "events-bench",
        dependencies: ["EndpointEvents", "LocationService", "Formats", "Geo", "NMEA", "BenchSupport"],
        path: "Benchmarks/EventsBench"),
    // libFuzzer target: the geofence document (docs/fuzzing.md).
    .executableTarget(
        name: "GeofenceDocumentFuzz", dependencies: ["EndpointEvents"], path: "Sources/Fuzz/GeofenceDocumentFuzz"),
]

// Against a real Home Assistant (KeepTrackTesting.HomeAssistant, docs/home-assistant.md): the built keeptrack
// uploading by MQTT discovery and to the OwnTracks integration, zones, a broker restart and a kill -9.
package.targets += [
    .testTarget(name: "HomeAssistantTests", dependencies: ["keeptrack", "KeepTrackTesting", "Geo"])
]

// The libFuzzer targets are targets of the package only when it is built for fuzzing, with
// KEEPTRACK_FUZZ=1 as .ci/fuzz and docs/fuzzing.md build them (with --sanitize=fuzzer): built without
// libFuzzer, each is an empty program, and compiling them took 54 s of every cold `swift test`, CI's
// included. `KEEPTRACK_FUZZ=1 swift build` compiles them all, as .ci/fuzz does with its sanitizers.
if Context.environment["KEEPTRACK_FUZZ"] != "1" {
    package.targets.removeAll { $0.name.hasSuffix("Fuzz") || $0.name == "TrackReaderFuzzing" }
}

// No warnings in the project's own code: every target this package defines (libraries, executables,
// benchmarks, examples, tests, fuzz targets) fails to build on a warning; dependencies build as they
// are. System library targets have no sources, and a plugin target takes no Swift settings (the
// C target CMosquitto has none to apply). Keep this last, so that targets appended above get it too.
for target in package.targets where target.type != .system && target.type != .plugin {
    target.swiftSettings = (target.swiftSettings ?? []) + [.treatAllWarnings(as: .error)]
}
