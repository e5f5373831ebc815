// A pipe for a child's output (pipe2 is declared only under _GNU_SOURCE, so it comes through the C shim).

@preconcurrency import Glibc
internal import CLibevent

extension FileCalls {
    /// A pipe, both ends close-on-exec (a child is given its end with dup2, which clears the flag there): the
    /// reading and the writing descriptor, for `FileDescriptor(owning:name:)`. The corresponding C function
    /// is `pipe2`.
    public static func pipe() throws(SystemError) -> (reading: CInt, writing: CInt) {
        var ends: [CInt] = [-1, -1]
        try sys("pipe2") { netlife_pipe2(&ends, O_CLOEXEC) }
        return (ends[0], ends[1])
    }
}
