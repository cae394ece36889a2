import ArgumentParser
import Delivery
import EndpointEvents
import Foundation
import Geo
import TrackServer
import TrackStore

/// `keeptrack serve devices overspeed ...`: a device's own speed limit, on serve's `--db`.
extension Serve.Devices {
    struct Overspeed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a device its own overspeed limit in km/h, in place of serve's --overspeed.",
            discussion: """
                The device's locations above the limit are an overspeed event, one per episode (it ends \
                when the speed falls 10 % below the limit), on every instance from the next batch on. \
                Without a device, lists the limits: ID<TAB>km/h, one a line (docs/events.md).

                Examples:
                  keeptrack serve devices overspeed van1 90        # above 90 km/h
                  keeptrack serve devices overspeed van1 --global  # --overspeed again
                  keeptrack serve devices overspeed                # the devices' own limits
                """)
        @Argument(help: "The device id.") var id: String?
        @Argument(help: ArgumentHelp("The limit, in km/h.", valueName: "km/h")) var limit: Double?
        @Flag(help: "Remove the device's own limit: serve's --overspeed applies again.") var global = false
        @ParentCommand var serve: Serve

        func validate() throws {
            if let limit, !(limit > 0 && limit.isFinite) {
                throw ValidationError("the limit is a speed in km/h above 0, got \(limit).")
            }
            if id != nil, limit == nil, !global {
                throw ValidationError("give the device's limit in km/h, or --global to remove it.")
            }
            if global, limit != nil { throw ValidationError("--global removes the device's limit: give no km/h.") }
            if id == nil, global { throw ValidationError("--global needs the device id.") }
        }

        func run() async throws {
            guard let id else {
                let limits = try await serve.withDeviceTokens(creating: false) { try await $0.overspeedLimits() }
                for (device, speed) in limits.sorted(by: { $0.key < $1.key }) {
                    print("\(device)\t\(Self.kmh(speed))")
                }
                return
            }
            if let limit {
                _ = try await serve.withDeviceTokens(creating: true) { store in
                    try await store.setOverspeedLimit(device: id, limit: limit / 3.6)
                }
                print("\(id): overspeed above \(Self.kmh(limit / 3.6)) km/h")
            } else {
                let (removed, location) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.setOverspeedLimit(device: id, limit: nil), store.location)
                }
                guard removed else {
                    throw CommandFailure("device '\(id)' has no overspeed limit of its own in \(location)")
                }
                print("\(id): serve's --overspeed applies")
            }
        }

        /// m/s as km/h, to a tenth, without a trailing `.0`.
        static func kmh(_ speed: Double) -> String {
            let tenths = (speed * 36).rounded()
            return tenths.truncatingRemainder(dividingBy: 10) == 0 ? "\(Int(tenths / 10))" : "\(tenths / 10)"
        }
    }
}

/// `keeptrack serve geofences ...` and `keeptrack serve hooks ...`, on serve's `--db` (docs/events.md).
extension Serve {
    struct Geofences: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The endpoint's geofences in serve's --db: each stored location is evaluated against them.",
            discussion: """
                A geofence is a GeoJSON Feature as keeptrack regions reads it (a Point with a radius, or a \
                Polygon), its id the geofence's name, with properties dwell, notifyOnEntry, notifyOnExit and \
                devices (the device ids it is for; absent: every device). A document is taken whole or not \
                at all (docs/events.md).

                Examples:
                  keeptrack serve geofences add places.geojson   # adds, or replaces by name
                  keeptrack serve geofences list                 # NAME<TAB>devices, one a line
                  keeptrack serve geofences remove depot
                  keeptrack serve geofences list --db /srv/keeptrack/endpoint.sqlite
                """,
            subcommands: [Add.self, List.self, Remove.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add the geofences of a GeoJSON file, replacing those of the same names.")
            @Argument(help: "The GeoJSON file (a FeatureCollection or one Feature).") var file: String
            @ParentCommand var serve: Serve

            func run() async throws {
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw CommandFailure("cannot read \(file)")
                }
                let geofences: [Geofence]
                do {
                    geofences = try GeofenceDocument.parse(Array(data))
                } catch {
                    throw CommandFailure("\(file): \(error.description)")
                }
                // One transaction: the document whole or not at all, whatever its size.
                let added = try await serve.withDeviceTokens(creating: true) { try await $0.putGeofences(geofences) }
                print("\(added) added, \(geofences.count - added) replaced")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "The geofences, one a line: NAME<TAB>devices (* for every device).")
            @ParentCommand var serve: Serve

            func run() async throws {
                let geofences = try await serve.withDeviceTokens(creating: false) { try await $0.geofences() }
                for g in geofences {
                    print("\(g.name)\t\(g.devices.map { $0.sorted().joined(separator: ",") } ?? "*")")
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove a geofence.")
            @Argument(help: "The geofence's name.") var name: String
            @ParentCommand var serve: Serve

            func run() async throws {
                let (removed, location) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.removeGeofence(name), store.location)
                }
                guard removed else { throw CommandFailure("no geofence '\(name)' in \(location)") }
                print("removed \(name)")
            }
        }
    }

    struct Hooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Hooks in serve's --db: where serve delivers events (webhooks, Home Assistant, MQTT).",
            discussion: """
                A webhook gets a POST of each event's JSON, signed X-KeepTrack-Signature: sha256=HMAC(secret, \
                body); a Home Assistant hook posts to its webhook trigger (/api/webhook/ID); an MQTT hook \
                publishes at QoS 1 (docs/events.md). Hooks to loopback and private addresses need serve's \
                --allow-private-hooks.

                Examples:
                  keeptrack serve hooks add ops --url https://ops.example.org/keeptrack \\
                    --secret-file ops.secret --kind geofenceEnter --kind geofenceExit
                  keeptrack serve hooks add ha --type homeassistant \\
                    --url http://homeassistant.local:8123/api/webhook/keeptrack
                  keeptrack serve hooks list     # name, type, URL, pending, dead, why (tabs)
                  keeptrack serve hooks test ops      # a test event, delivered now
                  keeptrack serve hooks retry ops     # its dead letters queued again
                  keeptrack serve hooks remove ops
                  keeptrack serve hooks list --db postgres://kt@db/keeptrack  # serve's store
                """,
            subcommands: [Add.self, List.self, Remove.self, Test.self, Retry.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a hook, or replace the one of its name (its queued events stay).")
            @Argument(help: "The hook's name.") var name: String
            @Option(help: ArgumentHelp("webhook, homeassistant or mqtt.", valueName: "type")) var type = "webhook"
            @Option(help: ArgumentHelp("http(s)://... (mqtt(s)://... for mqtt).", valueName: "url")) var url: String
            @Option(
                help: ArgumentHelp(
                    "A file whose first line is the secret that signs each post (at least 16 bytes; "
                        + "optional for homeassistant).", valueName: "file"))
            var secretFile: String?
            @Option(help: ArgumentHelp("An event kind it wants (repeatable; default: every kind).", valueName: "kind"))
            var kind: [String] = []
            @Option(help: ArgumentHelp("A device it wants (repeatable; default: every device).", valueName: "id"))
            var device: [String] = []
            @Option(help: ArgumentHelp("The MQTT topic; {device} and {kind} are replaced.", valueName: "topic"))
            var topic: String?
            @ParentCommand var serve: Serve

            func run() async throws {
                var secret: String?
                if let secretFile {
                    guard let data = FileManager.default.contents(atPath: secretFile) else {
                        throw CommandFailure("cannot read \(secretFile)")
                    }
                    // Its first line, whatever ends it: a Windows line end's CR would sign with it.
                    secret = String(
                        String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first ?? "")
                }
                let settings = HookSettings(
                    type: type, url: url, kinds: kind.isEmpty ? nil : kind, devices: device.isEmpty ? nil : device,
                    secret: secret, topic: topic)
                let hook: Hook
                switch settings.newHook(name: name) {
                case .success(let h): hook = h
                case .failure(let p) where p.field == "name": throw CommandFailure("hook '\(name)': \(p.message)")
                case .failure(let p): throw CommandFailure("--\(Self.option(p.field)): \(p.message)")
                }
                let created = try await serve.withDeviceTokens(creating: true) { store in
                    try await store.putHook(HookSettings.stored(hook))
                }
                print("\(created ? "added" : "replaced") \(name)")
                // Stored either way (serve may run with the flag); said now rather than found later
                // among the hook's dead letters.
                do throws(DeliveryFailure) {
                    _ = try await HookAddresses.checked(hook.target.host, allowPrivate: false)
                } catch {
                    // Only a refused address is said: a name that does not resolve here may
                    // resolve where serve runs.
                    if error.code == .addressRefused {
                        printError(
                            "warning: \(name): \(error.message); serve delivers to it only with "
                                + "--allow-private-hooks (and `hooks test` with its own)")
                    }
                }
            }

            static func option(_ field: String) -> String {
                switch field {
                case "secret": "secret-file"
                case "kinds": "kind"
                case "devices": "device"
                default: field
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "The hooks, one a line: NAME<TAB>TYPE<TAB>URL<TAB>pending<TAB>dead<TAB>why they fail (- if none).")
            @ParentCommand var serve: Serve

            func run() async throws {
                let (hooks, counts) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.storedHooks(), try await store.deliveryCounts())
                }
                for stored in hooks {
                    let hook = HookSettings.hook(stored)
                    let c = counts[stored.name]
                    // One line whatever the error says (its tabs and line ends as spaces).
                    let why = (c?.lastError ?? "-").map { $0 == "\t" || $0.isNewline ? " " : $0 }
                    print(
                        "\(stored.name)\t\(hook?.type.rawValue ?? "?")\t\(hook?.url ?? "?")\t\(c?.pending ?? 0)\t"
                            + "\(c?.dead ?? 0)\t\(String(why))")
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove a hook and its queued events.")
            @Argument(help: "The hook's name.") var name: String
            @ParentCommand var serve: Serve

            func run() async throws {
                let (removed, location) = try await serve.withDeviceTokens(creating: false) { store in
                    (try await store.removeHook(name), store.location)
                }
                guard removed else { throw CommandFailure("no hook '\(name)' in \(location)") }
                print("removed \(name)")
            }
        }

        struct Test: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Deliver a test event to a hook now and say what came of it.")
            @Argument(help: "The hook's name.") var name: String
            @Flag(help: "Let the hook reach loopback and private addresses (as serve --allow-private-hooks).")
            var allowPrivateHooks = false
            @ParentCommand var serve: Serve

            /// The flag, wherever it was written: serve's own of the same name takes it from the
            /// command line first (as it takes `--db`), so this one is there for the help.
            var allowPrivate: Bool { allowPrivateHooks || serve.allowPrivateHooks }

            func run() async throws {
                let stored = try await serve.withDeviceTokens(creating: false) { store in
                    try await store.storedHooks().first { $0.name == name }
                }
                guard let stored, let hook = HookSettings.hook(stored) else {
                    throw CommandFailure("no hook '\(name)'")
                }
                let answer = await HookTest.deliver(
                    hook, kinds: DeliveryKinds(allowPrivate: allowPrivate, instance: "test"),
                    now: WallClock().now.secondsSince1970)
                switch answer {
                case .delivered: print("delivered to \(name)")
                case .retry(_, let failure), .dead(let failure):
                    // This command does not ask serve: a receiver on this machine needs the flag
                    // here too, whatever serve was started with.
                    let hint =
                        failure.code == .addressRefused && !allowPrivate
                        ? "; to test a hook to this machine or a private network, pass --allow-private-hooks "
                            + "to `hooks test` (serve delivers to it only with its own --allow-private-hooks)" : ""
                    throw CommandFailure("not delivered to \(name): \(failure.message)\(hint)")
                }
            }
        }

        struct Retry: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Queue a hook's dead letters again (delivered by serve, in their devices' order).")
            @Argument(help: "The hook's name.") var name: String
            @ParentCommand var serve: Serve

            func run() async throws {
                let (n, location) = try await serve.withDeviceTokens(creating: false) { store in
                    // As POST /v1/hooks/{name}/retry: an unknown hook is an error, not "0 queued".
                    guard try await store.storedHooks().contains(where: { $0.name == name }) else {
                        return (Int?.none, store.location)
                    }
                    return (
                        try await store.retryDeadDeliveries(hook: name, now: WallClock().now.secondsSince1970),
                        store.location
                    )
                }
                guard let n else { throw CommandFailure("no hook '\(name)' in \(location)") }
                print("\(n) queued again")
            }
        }
    }
}
