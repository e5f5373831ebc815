// The process's heap policy for buffers: see `netlife_keep_buffer_memory` in the C shim.

@preconcurrency import Glibc
internal import CLibevent

/// How the process's allocator treats the memory of connection buffers.
public enum ProcessHeap {
    /// Keeps up to 16 MiB of freed heap in the process and serves blocks below 1 MiB from the heap, so that
    /// connection buffers freed after each write are reused rather than returned to the kernel and faulted
    /// back in (a brk call per read of a bulk stream, measured in Benchmarks/README.md). Does nothing when
    /// `GLIBC_TUNABLES` sets a malloc tunable: the operator's choice stands. Call once, at start-up.
    public static func keepBufferMemory() {
        if let tunables = getenv("GLIBC_TUNABLES"), String(cString: tunables).contains("glibc.malloc.") { return }
        netlife_keep_buffer_memory()
    }
}
