// The one C boundary of netlife: libevent 2.1 plus the few Linux calls Swift cannot reach directly.
// libc headers come first, or fd_set is incomplete when event2/ headers use it.
#ifndef NETLIFE_CLIBEVENT_SHIM_H
#define NETLIFE_CLIBEVENT_SHIM_H

#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <malloc.h>
#include <string.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <event2/dns.h>

// evtimer_new and evsignal_new are macros.
static inline struct event *netlife_evtimer_new(struct event_base *base, event_callback_fn cb, void *arg) {
    return event_new(base, -1, 0, cb, arg);
}

static inline struct event *netlife_evsignal_new(struct event_base *base, int signo, event_callback_fn cb, void *arg) {
    return event_new(base, signo, EV_SIGNAL | EV_PERSIST, cb, arg);
}

// read(2) and send(2) as plain system calls. glibc's wrappers are thread-cancellation points: in a process
// with more than one thread (netlifed has its stall watchdog) each call is bracketed by
// __pthread_enable_asynccancel and __pthread_disable_asynccancel, two atomic read-modify-writes and about 65
// instructions per echoed message, which a single-threaded C server does not pay. netlife never cancels a
// thread. Both return -1 with errno set on failure, as the wrappers do.
static inline ssize_t netlife_read(int fd, void *buf, size_t size) {
    return syscall(SYS_read, fd, buf, size);
}

static inline ssize_t netlife_send(int fd, const void *buf, size_t size, int flags) {
    return syscall(SYS_sendto, fd, buf, size, flags, (void *)0, (socklen_t)0);
}

// Reads at most `size` bytes from `fd` straight into `buf`'s own blocks: the space is reserved at the end of
// the buffer (in its last block, or a new one), filled with read and committed, so no byte is copied after
// the kernel's. Returns what read returned, with errno set when that is -1 (ENOMEM when no space could be
// reserved). The corresponding C functions are evbuffer_reserve_space and evbuffer_commit_space.
static inline ssize_t netlife_evbuffer_read(struct evbuffer *buf, int fd, size_t size) {
    struct evbuffer_iovec space;
    if (evbuffer_reserve_space(buf, (ev_ssize_t)size, &space, 1) != 1) { errno = ENOMEM; return -1; }
    ssize_t got = netlife_read(fd, space.iov_base, space.iov_len);
    if (got > 0) {
        space.iov_len = (size_t)got;
        evbuffer_commit_space(buf, &space, 1);
    }
    return got;
}

// evbuffer_write with its errno captured in `error` (0 when it did not fail): Swift's errno setter and getter
// are calls into another library, on the path of every message. An empty buffer writes nothing and returns 0
// (evbuffer_write itself returns -1 for it, with errno untouched).
static inline int netlife_evbuffer_write(struct evbuffer *buf, int fd, int *error) {
    *error = 0;
    if (evbuffer_get_length(buf) == 0) return 0;
    errno = 0;
    int written = evbuffer_write(buf, fd);
    *error = written < 0 ? (errno != 0 ? errno : EIO) : 0;
    return written;
}

// Keeps freed buffer memory in the process instead of handing it back to the kernel after every burst:
// glibc trims the top of the heap once 128 KiB there is free (a brk call, and page faults to take the memory
// back on the next read), and that threshold only grows after an mmap-served block is freed. A connection
// frees its read blocks (up to 2 x 256 KiB) after each write, so with the defaults a bulk stream made a brk
// call per read. Blocks below 1 MiB come from the heap; up to 16 MiB of free heap stays.
static inline void netlife_keep_buffer_memory(void) {
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 16 << 20);
}

// struct ucred needs _GNU_SOURCE, which the Swift Glibc module is not built with.
struct netlife_peer_credentials { pid_t pid; uid_t uid; gid_t gid; };

static inline int netlife_get_peer_credentials(int fd, struct netlife_peer_credentials *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

// The supplementary groups of a Unix socket's peer as they were when it connected (SO_PEERGROUPS, Linux 4.13;
// its value is part of Linux's ABI). `*count` is the room in `groups` on entry, the number of groups on
// return; ERANGE when they do not fit (then `*count` says how many there are).
#define NETLIFE_SO_PEERGROUPS 59
static inline int netlife_get_peer_groups(int fd, gid_t *groups, int *count) {
    socklen_t len = (socklen_t)(*count * (int)sizeof(gid_t));
    int result = getsockopt(fd, SOL_SOCKET, NETLIFE_SO_PEERGROUPS, groups, &len);
    *count = (int)(len / sizeof(gid_t));
    return result;
}

// The file-system identity of the calling thread alone. glibc's setgroups() changes every thread of the
// process (POSIX asks it to), and setfsuid() is declared only under _GNU_SOURCE; the raw system calls change
// the caller's credentials only, which is what acting for one requester on one thread needs. setfsuid and
// setfsgid return the previous id whether or not they changed it (a value of -1 changes nothing, so it reads
// the current one); setgroups returns 0 or -1.
static inline int netlife_thread_setfsuid(uid_t uid) { return (int)syscall(SYS_setfsuid, uid); }
static inline int netlife_thread_setfsgid(gid_t gid) { return (int)syscall(SYS_setfsgid, gid); }
static inline int netlife_thread_setgroups(size_t count, const gid_t *groups) {
    return (int)syscall(SYS_setgroups, count, groups);
}

// SCM_CREDENTIALS is declared only under _GNU_SOURCE, which the Swift Glibc module is not built with; its
// value is part of Linux's ABI.
#define NETLIFE_SCM_CREDENTIALS 0x02

// One datagram from a socket with SO_PASSCRED, without blocking: its bytes (at most `size`) and the sender's
// credentials as the kernel wrote them (pid 0 when none came). Descriptors a sender passed (SCM_RIGHTS) are
// closed at once: nothing here keeps them. `*truncated` is set when the datagram or its control data did not
// fit. Returns the bytes read, or -1 with errno set (EAGAIN: nothing waits). CMSG_* are macros, which Swift
// cannot use.
static inline ssize_t netlife_recv_with_credentials(int fd, void *buf, size_t size,
                                                    struct netlife_peer_credentials *sender, int *truncated) {
    union { struct cmsghdr align; char space[CMSG_SPACE(sizeof(struct netlife_peer_credentials)) + CMSG_SPACE(sizeof(int) * 16)]; } control;
    struct iovec iov = { .iov_base = buf, .iov_len = size };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control) };
    sender->pid = 0; sender->uid = (uid_t)-1; sender->gid = (gid_t)-1;
    *truncated = 0;
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
    if (n < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == NETLIFE_SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(*sender))) {
            memcpy(sender, CMSG_DATA(c), sizeof(*sender));
        } else if (c->cmsg_type == SCM_RIGHTS) {
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int passed;
                memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                close(passed);
            }
        }
    }
    if ((size_t)n > size || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) *truncated = 1;
    return n;
}

// connect(fd, AF_UNSPEC) dissolves a TCP association: the kernel sends RST, the fd stays valid, and the
// next read fails. This is how socket reclaim is emulated.
static inline int netlife_disconnect(int fd) {
    struct sockaddr sa = { .sa_family = AF_UNSPEC };
    return connect(fd, &sa, sizeof(sa));
}

// The bytes a socket has queued and the peer has not acknowledged yet (SIOCOUTQ, the same request as
// TIOCOUTQ); -1 on error. ioctl is variadic, which Swift cannot call.
static inline int netlife_unsent_bytes(int fd) {
    int queued = 0;
    return ioctl(fd, TIOCOUTQ, &queued) < 0 ? -1 : queued;
}

// The bytes received and not yet read from a socket (SIOCINQ, the same request as FIONREAD); -1 on error.
static inline int netlife_unread_bytes(int fd) {
    int queued = 0;
    return ioctl(fd, FIONREAD, &queued) < 0 ? -1 : queued;
}

// pipe2 is declared only under _GNU_SOURCE, which the Swift Glibc module is not built with.
int pipe2(int pipefd[2], int flags);

static inline int netlife_pipe2(int fds[2], int flags) {
    return pipe2(fds, flags);
}

// The exit status of a child that has exited, in waitpid's encoding, without reaping it (WNOWAIT): it stays a
// zombie, so that its pid, which is also its process group's id, cannot be given to another process while the
// rest of its group lives on. Returns 0, or -1 with errno set (EAGAIN: it has not exited). The siginfo_t
// fields are macros over a union, which Swift cannot read.
static inline int netlife_peek_exit(pid_t pid, int *status) {
    siginfo_t info = { 0 };
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0) return -1;
    if (info.si_pid == 0) { errno = EAGAIN; return -1; }
    *status = info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8 : (info.si_status & 0x7f);
    return 0;
}

// A PSI trigger (a pressure file opened for writing, with a trigger written to it) signals with POLLPRI, which
// libevent 2.1 cannot watch: its events are read, write, signal and close, and the trigger's descriptor polls
// readable and writable at all times. So a private epoll instance watches the trigger for EPOLLPRI alone, and
// libevent watches that instance, which is readable only while the trigger has fired. Returns the instance's
// descriptor (close-on-exec), or -1 with errno set.
static inline int netlife_priority_watch(int fd) {
    int instance = epoll_create1(EPOLL_CLOEXEC);
    if (instance < 0) return -1;
    struct epoll_event event = { .events = EPOLLPRI, .data = { .fd = fd } };
    if (epoll_ctl(instance, EPOLL_CTL_ADD, fd, &event) < 0) {
        int saved = errno;
        close(instance);
        errno = saved;
        return -1;
    }
    return instance;
}

// Takes what the private instance holds, without waiting. Returns 1 when the watched descriptor reports an
// error (a trigger whose cgroup was removed does, at every poll), 0 otherwise, or -1 with errno set. The kernel
// hands a trigger's event to the first poll that sees it, and libevent's poll of the instance already did: this
// call usually finds nothing, which still means the trigger fired once.
static inline int netlife_priority_watch_take(int instance) {
    struct epoll_event event = { 0 };
    int count = epoll_wait(instance, &event, 1, 0);
    if (count < 0) return -1;
    return count > 0 && (event.events & (EPOLLERR | EPOLLHUP)) ? 1 : 0;
}

#endif
