import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// Which addresses a hook may reach: a server that sends requests where an admin says is a tool
/// against what stands behind it (the database, a router's page, a cloud's metadata service), so
/// only public unicast addresses are allowed unless the operator allows private ones (a receiver on
/// the same network, Home Assistant on the LAN).
///
/// A hook's host is resolved before each round of deliveries and *every* address it has must be
/// allowed; the connection then goes to that checked address (AsyncHTTPClient's DNS override, the
/// MQTT client given the address), so a name that answers differently a moment later (DNS
/// rebinding) does not reach elsewhere. Redirects are never followed (docs/events.md).
public enum HookAddresses {
    /// Whether a 4-byte (IPv4) or 16-byte (IPv6) address is public unicast: not unspecified,
    /// loopback, private (RFC 1918, unique local), shared (100.64/10), link-local, multicast,
    /// documentation, benchmarking, reserved, or an IPv6 form of one of those (IPv4-mapped,
    /// NAT64 64:ff9b::/96, 6to4 2002::/16).
    public static func isPublic(_ a: [UInt8]) -> Bool {
        switch a.count {
        case 4: return isPublicV4(a[0], a[1], a[2], a[3])
        case 16: return isPublicV6(a)
        default: return false
        }
    }

    static func isPublicV4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> Bool {
        switch (a, b) {
        case (0, _), (10, _), (127, _): return false  // this network, private, loopback
        case (100, 64...127): return false  // shared address space (carrier NAT)
        case (169, 254): return false  // link-local (cloud metadata: 169.254.169.254)
        case (172, 16...31): return false  // private
        case (192, 168): return false  // private
        case (198, 18...19): return false  // benchmarking
        case (224...255, _): return false  // multicast, reserved, broadcast
        default: break
        }
        switch (a, b, c) {
        case (192, 0, 0), (192, 0, 2), (192, 88, 99): return false  // protocol assignments, TEST-NET-1, 6to4 relay
        case (198, 51, 100), (203, 0, 113): return false  // TEST-NET-2, TEST-NET-3
        default: return true
        }
    }

    static func isPublicV6(_ a: [UInt8]) -> Bool {
        let zeroPrefix = a[0..<10].allSatisfy { $0 == 0 }
        // IPv4-mapped ::ffff:a.b.c.d
        if zeroPrefix && a[10] == 0xFF && a[11] == 0xFF { return isPublicV4(a[12], a[13], a[14], a[15]) }
        if a[0..<12].allSatisfy({ $0 == 0 }) { return false }  // ::, ::1, and IPv4-compatible ::a.b.c.d
        if a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xFF && a[3] == 0x9B && a[4..<12].allSatisfy({ $0 == 0 }) {
            return isPublicV4(a[12], a[13], a[14], a[15])  // NAT64 64:ff9b::/96
        }
        if a[0] == 0x20 && a[1] == 0x02 { return isPublicV4(a[2], a[3], a[4], a[5]) }  // 6to4 2002::/16
        if a[0] == 0x01 && a[1] == 0x00 && a[2..<8].allSatisfy({ $0 == 0 }) { return false }  // discard 100::/64
        if a[0] == 0x20 && a[1] == 0x01 && a[2] < 0x02 { return false }  // 2001::/23: Teredo, benchmarking, ORCHID...
        if a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x0D && a[3] == 0xB8 { return false }  // documentation
        if a[0] & 0xFE == 0xFC { return false }  // unique local fc00::/7
        if a[0] == 0xFE && a[1] & 0xC0 == 0x80 { return false }  // link-local fe80::/10
        if a[0] == 0xFE && a[1] & 0xC0 == 0xC0 { return false }  // site-local fec0::/10 (deprecated)
        if a[0] == 0xFF { return false }  // multicast
        return a[0] & 0xE0 == 0x20  // global unicast is 2000::/3; the rest is reserved
    }

    /// An address as text (`192.0.2.1`, `2001:db8::1`).
    public static func text(_ a: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = a.count == 4 ? AF_INET : AF_INET6
        _ = a.withUnsafeBytes { src in inet_ntop(family, src.baseAddress, &buffer, socklen_t(buffer.count)) }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// The address a literal host is (`203.0.113.7`, `2001:db8::1`), or `nil` for a name.
    public static func literal(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// The addresses `host` resolves to (getaddrinfo, on NIO's thread pool: it blocks).
    ///
    /// - Throws: ``DeliveryFailure`` (``DeliveryFailure/Code/unresolvable``).
    public static func resolve(_ host: String) async throws(DeliveryFailure) -> [[UInt8]] {
        if let literal = literal(host) { return [literal] }
        let result: Result<[[UInt8]], DeliveryFailure>
        do {
            result = try await NIOThreadPool.singleton.runIfActive { () -> Result<[[UInt8]], DeliveryFailure> in
                var hints = addrinfo()
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var list: UnsafeMutablePointer<addrinfo>?
                let rc = getaddrinfo(host, nil, &hints, &list)
                guard rc == 0, let first = list else {
                    let why = String(cString: gai_strerror(rc))
                    return .failure(DeliveryFailure(.unresolvable, "cannot resolve \(host): \(why)"))
                }
                defer { freeaddrinfo(first) }
                var out: [[UInt8]] = []
                var p: UnsafeMutablePointer<addrinfo>? = first
                while let ai = p {
                    if ai.pointee.ai_family == AF_INET, let sa = ai.pointee.ai_addr {
                        sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
                            var a = s.pointee.sin_addr
                            out.append(withUnsafeBytes(of: &a) { Array($0) })
                        }
                    } else if ai.pointee.ai_family == AF_INET6, let sa = ai.pointee.ai_addr {
                        sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                            var a = s.pointee.sin6_addr
                            out.append(withUnsafeBytes(of: &a) { Array($0) })
                        }
                    }
                    p = ai.pointee.ai_next
                }
                var seen = Set<[UInt8]>()
                return .success(out.filter { seen.insert($0).inserted })
            }
        } catch {
            throw DeliveryFailure(.unresolvable, "cannot resolve \(host): the resolver's threads are stopped")
        }
        let addresses = try result.get()
        guard !addresses.isEmpty else { throw DeliveryFailure(.unresolvable, "\(host) has no address") }
        return addresses
    }

    /// The address to connect to for `host`: its first address once every one is allowed (public,
    /// or any with `allowPrivate`).
    ///
    /// - Throws: ``DeliveryFailure``: ``DeliveryFailure/Code/unresolvable``, or
    ///   ``DeliveryFailure/Code/addressRefused`` naming the first address that is not public.
    public static func checked(_ host: String, allowPrivate: Bool) async throws(DeliveryFailure) -> [UInt8] {
        let addresses = try await resolve(host)
        if !allowPrivate, let refused = addresses.first(where: { !isPublic($0) }) {
            // A name is said with the address it resolved to; an address alone.
            let address = text(refused)
            let what = literal(host) != nil ? "\(address) is" : "\(host) is \(address),"
            throw DeliveryFailure(
                .addressRefused, "\(what) not a public address (private hooks are not allowed)")
        }
        return addresses[0]
    }
}
