// A view of a libevent evbuffer: a chain of byte blocks that can be moved between buffers without copying
// and written to a socket with writev (or sendfile, for file segments).

internal import CLibevent
@preconcurrency import Glibc

/// A non-owning handle on an evbuffer. The `Connection` that owns a buffer frees it when it closes;
/// buffers from `allocate()` are freed with `free()`.
public struct EventBuffer {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    /// A new, empty buffer that the caller frees with `free()`. The corresponding C function is `evbuffer_new`.
    public static func allocate() -> EventBuffer {
        EventBuffer(try! libevent("evbuffer_new") { evbuffer_new() })
    }

    /// Marks the buffer as one that is written to a descriptor, so that its file segments are sent with
    /// sendfile rather than mapped and copied. The corresponding C function is `evbuffer_set_flags`.
    func setDrainsToDescriptor() {
        evbuffer_set_flags(pointer, UInt64(EVBUFFER_FLAG_DRAINS_TO_FD))
    }

    /// Undoes `setDrainsToDescriptor()`: the buffer's bytes go through a transport (TLS), which reads them,
    /// so file segments are mapped when they are added. The corresponding C function is `evbuffer_clear_flags`.
    func clearDrainsToDescriptor() {
        evbuffer_clear_flags(pointer, UInt64(EVBUFFER_FLAG_DRAINS_TO_FD))
    }

    /// Frees a buffer made with `allocate()`.
    public func free() { evbuffer_free(pointer) }

    /// The number of bytes in the buffer.
    public var count: Int { evbuffer_get_length(pointer) }

    /// Whether the buffer holds no bytes.
    public var isEmpty: Bool { count == 0 }

    /// Appends a copy of `bytes`. The corresponding C function is `evbuffer_add`.
    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        libeventMustSucceed("evbuffer_add") { evbuffer_add(pointer, base, bytes.count) }
    }

    /// Appends the bytes of `bytes`.
    public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends the UTF-8 bytes of `text`.
    public func append(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends `length` bytes of the open `file` from `offset` as a file segment: nothing is read now; the
    /// bytes go from the page cache to the socket with sendfile when the buffer is written. The buffer owns
    /// the descriptor from now on and closes it when the segment is sent or dropped, also when this call
    /// throws.
    ///
    /// The segment is queued in pieces of at most `sendfilePiece` bytes: libevent 2.1 sends a whole file
    /// segment in one sendfile call (it ignores the size it is given on Linux), and over loopback to a client
    /// that keeps up, one call for a 1 GiB file held the loop for 365 ms (an 8 GiB one tripped the 2 s
    /// loop-stall watchdog). One piece goes out per write, as nginx's 2 MiB sendfile_max_chunk does, so the
    /// loop serves everything else between pieces.
    /// The corresponding C functions are `evbuffer_file_segment_new` and `evbuffer_add_file_segment`.
    public func appendFile(_ file: consuming FileDescriptor, offset: Int, length: Int) throws(SystemError) {
        guard length > 0 else { return }
        let fd = file.rawValue
        // Fails only when memory is exhausted: libevent made no segment, and `file` closes the descriptor.
        let segment = try libevent("evbuffer_file_segment_new") {
            evbuffer_file_segment_new(fd, Int64(offset), Int64(length), UInt32(EVBUF_FS_CLOSE_ON_FREE))
        }
        _ = file.take()
        // Each piece holds a reference to the segment; ours goes at the end, and the last piece sent or
        // dropped closes the descriptor.
        defer { evbuffer_file_segment_free(segment) }
        var queued = 0
        while queued < length {
            let piece = min(Self.sendfilePiece, length - queued)
            try libevent("evbuffer_add_file_segment") {
                evbuffer_add_file_segment(pointer, segment, Int64(queued), Int64(piece))
            }
            queued += piece
        }
    }

    /// The most bytes one sendfile call sends (nginx's `sendfile_max_chunk` default).
    public static let sendfilePiece = 2 << 20

    /// Reads at most `size` bytes from the socket `fd` into the buffer's own blocks, with no copy after the
    /// kernel's. Returns what readv returned: the byte count, 0 at end of stream, or -1 with `errno` set.
    /// The corresponding C functions are `evbuffer_reserve_space`, `readv` and `evbuffer_commit_space`.
    func read(from fd: CInt, atMost size: Int) -> Int {
        netlife_evbuffer_read(pointer, fd, size)
    }

    /// Lets `body` fill at most `size` bytes of space reserved at the end of the buffer, and keeps the bytes
    /// it says it transferred: a transport decrypts straight into the buffer's own blocks.
    /// The corresponding C functions are `evbuffer_reserve_space` and `evbuffer_commit_space`.
    func receive(atMost size: Int, _ body: (UnsafeMutableRawBufferPointer) -> TransportResult) -> TransportResult {
        var space = iovec()
        guard evbuffer_reserve_space(pointer, size, &space, 1) == 1, let base = space.iov_base else {
            return .failed(SystemError("evbuffer_reserve_space", Errno(rawValue: ENOMEM)))
        }
        let result = body(UnsafeMutableRawBufferPointer(start: base, count: min(space.iov_len, size)))
        if case .transferred(let count) = result {
            space.iov_len = count
            libeventMustSucceed("evbuffer_commit_space") { evbuffer_commit_space(pointer, &space, 1) }
        }
        return result
    }

    /// Calls `body` with the buffer's first contiguous bytes, at most `maxBytes` of them (none when the buffer
    /// is empty). A mapped file segment is one block. The corresponding C function is `evbuffer_peek`.
    func withContiguousFront<Result>(maxBytes: Int, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var front = iovec()
        guard evbuffer_peek(pointer, -1, nil, &front, 1) >= 1, let base = front.iov_base else {
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return body(UnsafeRawBufferPointer(start: base, count: min(front.iov_len, maxBytes)))
    }

    /// Moves every byte of `source` to the end of this buffer without copying (the blocks change hands).
    /// The corresponding C function is `evbuffer_add_buffer`.
    public func moveAll(from source: EventBuffer) {
        libeventMustSucceed("evbuffer_add_buffer") { evbuffer_add_buffer(pointer, source.pointer) }
    }

    /// Removes the first `count` bytes (all of them if fewer). The corresponding C function is `evbuffer_drain`.
    public func drain(_ count: Int) {
        libeventMustSucceed("evbuffer_drain") { evbuffer_drain(pointer, count) }
    }

    /// Removes every byte.
    public func removeAll() { drain(count) }

    /// A copy of the first `limit` bytes (all by default), leaving the buffer as it is.
    /// The corresponding C function is `evbuffer_copyout`.
    public func peekBytes(limit: Int = .max) -> [UInt8] {
        let length = min(limit, count)
        guard length > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: length) { storage, initialized in
            initialized = max(0, evbuffer_copyout(pointer, storage.baseAddress, length))
        }
    }

    /// What `readLine(maxLength:)` found.
    public enum Line: Equatable {
        /// A complete line, without its LF or CRLF ending; it has been removed from the buffer.
        case line([UInt8])
        /// No line ending yet, and the bytes so far are within the limit.
        case incomplete
        /// The line (ended or not) is longer than the limit; nothing was removed.
        case tooLong
    }

    /// Removes one LF- or CRLF-terminated line of at most `maxLength` bytes from the front of the buffer.
    /// The corresponding C function is `evbuffer_search_eol`.
    public func readLine(maxLength: Int) -> Line {
        var eolLength = 0
        let position = evbuffer_search_eol(pointer, nil, &eolLength, EVBUFFER_EOL_CRLF)
        guard position.pos >= 0 else { return count > maxLength ? .tooLong : .incomplete }
        let length = Int(position.pos)
        guard length <= maxLength else { return .tooLong }
        let line = peekBytes(limit: length)
        drain(length + eolLength)
        return .line(line)
    }
}
