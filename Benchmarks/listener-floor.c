// Benchmarks/listener-floor.c: the floor of the lifecycle scenario, the system calls alone. An app's 1,000
// listeners on 127.0.0.1 with 10,000 accepted connections dealt over their ports (held open by a child
// process, the accepted ends registered in the epoll set as netlifed's are), then per cycle the calls that
// netlifed makes before each reply:
//   background: epoll_ctl(DEL) and close for every listener;
//   foreground: bind and listen for every listener, on sockets made ahead (socket and setsockopt(SO_REUSEADDR),
//               which netlifed makes in the background after the reply; timed apart as "prepare"). The
//               registration with epoll (epoll_ctl(ADD)), which netlifed makes 1 ms after the reply, is
//               timed apart as "accept_start".
// The established connections matter: each bind and close walks the port's bind bucket, which holds them
// (with 10 per port the calls cost about half as much again as on empty ports).
//
// With --libevent the listeners are libevent's evconnlisteners on an event_base, as a C libevent server
// would hold them (evconnlistener_free per listener on background, evconnlistener_new on the prepared sockets
// on foreground): the system calls plus libevent's own bookkeeping, which netlifed's listeners go through too.
//
// Built and run by Benchmarks/run (the lifecycle scenario, one run of each kind per round next to netlifed's),
// or by hand:
//   cc -O2 -o /tmp/listener-floor Benchmarks/listener-floor.c $(pkg-config --cflags --libs libevent)
//   /tmp/listener-floor --cycles 10 [--libevent]
// Prints one JSON line: the milliseconds of every cycle's background, foreground and prepare, with p50 and p99.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <event2/event.h>
#include <event2/listener.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void die(const char *what) {
    fprintf(stderr, "listener-floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int tcp_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("setsockopt");
    return fd;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// {"p50":..,"p99":..,"values":[..]}: the shape of the lifecycle client's figures (percentiles by rank, as
// summarize.py takes them).
static void on_accept(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *peer, int length, void *context) {
    (void)listener; (void)fd; (void)peer; (void)length; (void)context;
}

static void print_figure(const char *name, const double *values, int count, const char *tail) {
    double sorted[count];
    memcpy(sorted, values, sizeof sorted);
    qsort(sorted, count, sizeof *sorted, compare);
    int p50 = (count + 1) / 2 - 1, p99 = (99 * count + 99) / 100 - 1;
    printf("\"%s\":{\"p50\":%.4f,\"p99\":%.4f,\"values\":[", name, sorted[p50], sorted[p99]);
    for (int i = 0; i < count; i++) printf("%s%.4f", i ? "," : "", values[i]);
    printf("]}%s", tail);
}

int main(int argc, char **argv) {
    int listeners = 1000, connections = 10000, cycles = 10, use_libevent = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--listeners") == 0) listeners = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--connections") == 0) connections = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--cycles") == 0) cycles = atoi(argv[++i]);
        else if (strcmp(argv[i], "--libevent") == 0) use_libevent = 1;
        else { fprintf(stderr, "usage: listener-floor [--listeners N] [--connections N] [--cycles N] [--libevent]\n"); return 2; }
    }
    if (listeners < 1 || connections < 0 || cycles < 1) { fprintf(stderr, "listener-floor: bad arguments\n"); return 2; }
    alarm(120);   // a stuck run ends by itself
    int *fds = calloc(listeners, sizeof *fds);
    struct sockaddr_in *addresses = calloc(listeners, sizeof *addresses);
    double *background = calloc(cycles, sizeof *background), *foreground = calloc(cycles, sizeof *foreground);
    double *prepare = calloc(cycles, sizeof *prepare), *accept_start = calloc(cycles, sizeof *accept_start);
    if (!fds || !addresses || !background || !foreground || !prepare || !accept_start) die("calloc");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    for (int i = 0; i < listeners; i++) {
        fds[i] = tcp_socket();
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (bind(fds[i], (struct sockaddr *)&a, sizeof a) != 0) die("bind");
        if (listen(fds[i], 511) != 0) die("listen");
        socklen_t length = sizeof a;
        if (getsockname(fds[i], (struct sockaddr *)&a, &length) != 0) die("getsockname");
        addresses[i] = a;
        struct epoll_event e = { .events = EPOLLIN, .data.fd = fds[i] };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e) != 0) die("epoll_ctl");
    }
    // The peers: a child connects `connections` times, dealt over the ports, and holds them until killed.
    int ready[2];
    if (pipe(ready) != 0) die("pipe");
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        // The listeners are the parent's alone: a copy here would keep them listening after their close.
        for (int i = 0; i < listeners; i++) close(fds[i]);
        close(ep);
        for (int c = 0; c < connections; c++) {
            int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (s < 0 || connect(s, (struct sockaddr *)&addresses[c % listeners], sizeof addresses[c % listeners]) != 0) die("connect");
        }
        if (write(ready[1], "x", 1) != 1) die("write");
        pause();
        _exit(0);
    }
    int accepted = 0;
    while (accepted < connections) {
        struct epoll_event events[64];
        int n = epoll_wait(ep, events, 64, 5000);
        if (n <= 0) { kill(child, SIGKILL); fprintf(stderr, "listener-floor: only %d connections arrived\n", accepted); return 1; }
        for (int k = 0; k < n; k++) {
            int fd;
            while ((fd = accept4(events[k].data.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd };
                if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) die("epoll_ctl");
                accepted++;
            }
        }
    }
    char byte;
    if (read(ready[0], &byte, 1) != 1) die("read");
    // libevent's listeners take over the sockets (the accepted connections stay in the plain epoll set).
    struct event_config *config = event_config_new();
    event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK);
    struct event_base *base = use_libevent ? event_base_new_with_config(config) : NULL;
    event_config_free(config);
    struct evconnlistener **evls = calloc(listeners, sizeof *evls);
    if (!evls || (use_libevent && !base)) die("libevent");
    const unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC;
    for (int i = 0; use_libevent && i < listeners; i++) {
        epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
        if (!(evls[i] = evconnlistener_new(base, on_accept, NULL, flags, 0, fds[i]))) die("evconnlistener_new");
    }
    for (int round = 0; round < cycles; round++) {
        double t0 = now_ms();
        for (int i = 0; i < listeners; i++) {
            if (use_libevent) {
                evconnlistener_free(evls[i]);
            } else {
                epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
                close(fds[i]);
            }
        }
        background[round] = now_ms() - t0;
        usleep(20000);
        t0 = now_ms();
        for (int i = 0; i < listeners; i++) fds[i] = tcp_socket();
        prepare[round] = now_ms() - t0;
        usleep(20000);
        t0 = now_ms();
        for (int i = 0; i < listeners; i++) {
            if (bind(fds[i], (struct sockaddr *)&addresses[i], sizeof addresses[i]) != 0) die("bind (reopen)");
            if (listen(fds[i], 511) != 0) die("listen (reopen)");
        }
        foreground[round] = now_ms() - t0;
        usleep(1000);
        t0 = now_ms();
        for (int i = 0; i < listeners; i++) {
            if (use_libevent) {
                if (!(evls[i] = evconnlistener_new(base, on_accept, NULL, flags, 0, fds[i]))) die("evconnlistener_new");
            } else {
                struct epoll_event e = { .events = EPOLLIN, .data.fd = fds[i] };
                if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e) != 0) die("epoll_ctl (reopen)");
            }
        }
        accept_start[round] = now_ms() - t0;
        usleep(20000);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    printf("{\"listeners\":%d,\"connections\":%d,\"cycles\":%d,\"libevent\":%s,", listeners, connections, cycles,
           use_libevent ? "true" : "false");
    print_figure("background_ms", background, cycles, ",");
    print_figure("foreground_ms", foreground, cycles, ",");
    print_figure("prepare_ms", prepare, cycles, ",");
    print_figure("accept_start_ms", accept_start, cycles, "}\n");
    return 0;
}
