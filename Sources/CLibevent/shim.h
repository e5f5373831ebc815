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
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>

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

// struct ucred needs _GNU_SOURCE, which the Swift Glibc module is not built with.
struct netlife_peer_credentials { pid_t pid; uid_t uid; gid_t gid; };

static inline int netlife_get_peer_credentials(int fd, struct netlife_peer_credentials *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
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

#endif
