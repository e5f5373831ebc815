// ref-echo-server: the reference that netlifed's echo service is measured against. A single-threaded libevent
// echo server written the way a careful C programmer would, in one of two modes:
//
//   --mode event        plain events (the default): one read into a shared 64 KiB buffer, written straight
//                       back with send(); only the part a full socket refused is copied aside, reading stops
//                       and a write event waits until it is gone. The events live inside the connection's
//                       own allocation (event_assign), so an idle connection costs one malloc.
//   --mode bufferevent  one bufferevent per connection; the input's blocks move to the output without a
//                       copy (bufferevent_write_buffer). libevent 2.1 reads at most 4 KiB per call here.
//
// Both set TCP_NODELAY on accepted sockets (as netlifed does) and stop reading while a connection holds more
// than 4 MiB of unsent output (netlifed's high-water mark). It listens on 127.0.0.1 (port 0 by default),
// prints the bound port as one line on stdout, and runs until SIGTERM or SIGINT.
//
// Build: cc -O2 -o ref-echo-server ref-echo-server.c $(pkg-config --cflags --libs libevent)

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/listener.h>

enum { READ_SIZE = 64 * 1024, HIGH_WATER = 4 << 20 };

static struct event_base *base;

static void set_nodelay(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// MARK: plain-event mode

struct conn {
    int fd;
    struct event read_event;
    struct event write_event;
    char *pending;        // bytes a full socket refused, sent before anything is read again
    size_t pending_len;
    size_t pending_off;
};

static unsigned char read_buffer[READ_SIZE];

static void conn_free(struct conn *c) {
    event_del(&c->read_event);
    event_del(&c->write_event);
    close(c->fd);
    free(c->pending);
    free(c);
}

static void conn_readable(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    struct conn *c = arg;
    ssize_t n = read(fd, read_buffer, sizeof read_buffer);
    if (n == 0) { conn_free(c); return; }
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        conn_free(c);
        return;
    }
    ssize_t w = send(fd, read_buffer, (size_t)n, MSG_NOSIGNAL);
    if (w == n) return;
    if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { conn_free(c); return; }
        w = 0;
    }
    // A partial write: keep the rest, stop reading until it is out (back-pressure on the peer).
    size_t rest = (size_t)(n - w);
    c->pending = malloc(rest);
    if (c->pending == NULL) { conn_free(c); return; }
    memcpy(c->pending, read_buffer + w, rest);
    c->pending_len = rest;
    c->pending_off = 0;
    event_del(&c->read_event);
    event_add(&c->write_event, NULL);
}

static void conn_writable(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    struct conn *c = arg;
    while (c->pending_off < c->pending_len) {
        ssize_t w = send(fd, c->pending + c->pending_off, c->pending_len - c->pending_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            conn_free(c);
            return;
        }
        c->pending_off += (size_t)w;
    }
    free(c->pending);
    c->pending = NULL;
    c->pending_len = c->pending_off = 0;
    event_del(&c->write_event);
    event_add(&c->read_event, NULL);
}

static void accept_plain(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *address, int length, void *arg) {
    (void)listener; (void)address; (void)length; (void)arg;
    set_nodelay(fd);
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL) { close(fd); return; }
    c->fd = fd;
    event_assign(&c->read_event, base, fd, EV_READ | EV_PERSIST, conn_readable, c);
    event_assign(&c->write_event, base, fd, EV_WRITE | EV_PERSIST, conn_writable, c);
    event_add(&c->read_event, NULL);
}

// MARK: bufferevent mode

static void bev_readable(struct bufferevent *bev, void *arg) {
    (void)arg;
    bufferevent_write_buffer(bev, bufferevent_get_input(bev));
    if (evbuffer_get_length(bufferevent_get_output(bev)) > HIGH_WATER) bufferevent_disable(bev, EV_READ);
}

static void bev_drained(struct bufferevent *bev, void *arg) {
    (void)arg;
    // Called when the output is empty (the write low-water mark is 0).
    if (!(bufferevent_get_enabled(bev) & EV_READ)) bufferevent_enable(bev, EV_READ);
}

static void bev_event(struct bufferevent *bev, short what, void *arg) {
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) bufferevent_free(bev);
}

static void accept_bufferevent(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *address, int length, void *arg) {
    (void)listener; (void)address; (void)length; (void)arg;
    set_nodelay(fd);
    struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) { close(fd); return; }
    bufferevent_set_max_single_read(bev, READ_SIZE);   // libevent 2.1 still caps each read at 4 KiB
    bufferevent_setcb(bev, bev_readable, bev_drained, bev_event, NULL);
    bufferevent_enable(bev, EV_READ);
}

// MARK: main

static void accept_failed(struct evconnlistener *listener, void *arg) {
    (void)listener; (void)arg;
    int error = EVUTIL_SOCKET_ERROR();
    fprintf(stderr, "ref-echo-server: accept: %s\n", evutil_socket_error_to_string(error));
    if (error == EMFILE || error == ENFILE) {
        // Pausing would be kinder; the benchmark never gets here, and a spinning listener shows a bad set-up.
        event_base_loopexit(base, NULL);
    }
}

static void stop_on_signal(evutil_socket_t signal_number, short what, void *arg) {
    (void)signal_number; (void)what; (void)arg;
    event_base_loopexit(base, NULL);
}

static int usage(void) {
    fprintf(stderr, "usage: ref-echo-server [--mode event|bufferevent] [--port N] [--backlog N]\n");
    return 2;
}

int main(int argc, char **argv) {
    int bufferevent_mode = 0, port = 0, backlog = 511;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            const char *mode = argv[++i];
            if (strcmp(mode, "event") == 0) bufferevent_mode = 0;
            else if (strcmp(mode, "bufferevent") == 0) bufferevent_mode = 1;
            else return usage();
        } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            port = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--backlog") == 0 && i + 1 < argc) {
            backlog = atoi(argv[++i]);
        } else {
            return usage();
        }
    }
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    if (base == NULL) { fprintf(stderr, "ref-echo-server: event_base_new failed\n"); return 1; }

    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct evconnlistener *listener = evconnlistener_new_bind(
        base, bufferevent_mode ? accept_bufferevent : accept_plain, NULL,
        LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, backlog,
        (struct sockaddr *)&address, sizeof address);
    if (listener == NULL) { perror("ref-echo-server: listen"); return 1; }
    evconnlistener_set_error_cb(listener, accept_failed);

    struct sockaddr_in bound;
    socklen_t length = sizeof bound;
    if (getsockname(evconnlistener_get_fd(listener), (struct sockaddr *)&bound, &length) != 0) { perror("getsockname"); return 1; }
    printf("%d\n", ntohs(bound.sin_port));
    fflush(stdout);

    struct event *term = evsignal_new(base, SIGTERM, stop_on_signal, NULL);
    struct event *interrupt = evsignal_new(base, SIGINT, stop_on_signal, NULL);
    event_add(term, NULL);
    event_add(interrupt, NULL);
    event_base_dispatch(base);

    // Connections still open are left to the exit; the process ends here.
    event_free(term);
    event_free(interrupt);
    evconnlistener_free(listener);
    event_base_free(base);
    return 0;
}
