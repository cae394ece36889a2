extension JSONScanner {
    /// Walks an object: `{`, then for each member its key, with the scanner at the member's value
    /// (which `member` reads or skips), then `}`. The one object walk of the wire readers.
    @inline(__always)
    mutating func members(_ member: (inout JSONScanner, String) throws(Failure) -> Void) throws(Failure) {
        try expect(UInt8(ascii: "{"))
        if take(UInt8(ascii: "}")) { return }
        repeat {
            let key = try string()
            try expect(UInt8(ascii: ":"))
            try member(&self, key)
        } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    /// Walks an array: `[`, each element (read by `element`), `]`.
    @inline(__always)
    mutating func elements(_ element: (inout JSONScanner) throws(Failure) -> Void) throws(Failure) {
        try expect(UInt8(ascii: "["))
        if take(UInt8(ascii: "]")) { return }
        repeat {
            try element(&self)
        } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"))
    }
}
