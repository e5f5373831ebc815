// loadgen: a closed-loop load generator for echo servers on 127.0.0.1, with epoll.
//
// Modes:
//   pingpong   each connection sends one message of --size bytes, waits for the whole echo, repeats
//   pipeline   --inflight messages in flight per connection: a new one goes out as each echo completes
//   stream     16 KiB messages (unless --size says otherwise), --inflight of them in flight per connection:
//              a continuous stream both ways; MB/s is what comes back
//   idle       open --connections connections, hold them, and report the server's RSS per connection
//
// Every byte sent follows a per-connection pattern and the echo is checked against it: every byte with
// --check all (the default of pingpong and pipeline), or with --check sampled (the default of stream) every
// byte of one read in 16 and, in the others, 64-byte windows at the start, every 4 KiB and at the end. A
// full check of a 5 GB/s stream costs the generator about a tenth of its CPU, and on one connection the
// generator is as busy as the server, so a full check made it the bottleneck: measured, netlifed streamed
// 4,942 MB/s with it and 5,592 without, the C server (itself the bottleneck) the same either way. The
// sampled check still sees a byte lost, doubled or reordered at any point (the pattern is offset-dependent
// and every count is checked), within a few reads. --check sparse goes further: the reads that are not checked
// whole are discarded in the kernel (recv with MSG_TRUNC: counted, never copied out), so a flipped byte there
// goes unseen, while a lost or doubled one still shows at the next whole read.
//
// --send splice sends without a copy: the pattern's pages are referenced into a pipe (vmsplice; the pattern
// never changes) and spliced from there into the socket. With --check sparse it makes the generator as cheap
// per byte as this machine allows, which one stream needs: on loopback the sender also runs the receiver's
// TCP input and wakes it, so a copying generator costs more per byte than an echo server and sets the pace
// of any server faster than it (Benchmarks/README.md, "Streaming: a leaner generator"). A run warms
// up for --warmup seconds, then measures for --duration seconds, and prints one JSON line: messages/s, MB/s
// (10^6 bytes echoed back), latency p50/p99/p99.9 in microseconds (per message, from the moment it is
// queued to the moment its last byte is back: the round trip in pingpong), errors, and, with --server-pid,
// the server's CPU seconds over the measured period (utime + stime from /proc/PID/stat) and the work per
// server CPU-second, and the CPU time the hypervisor took from the machine meanwhile (steal_s). It always
// targets 127.0.0.1 and stops by itself (an alarm ends a stuck run).
//
// Build: cc -O2 -pthread -o loadgen loadgen.c

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum mode { PINGPONG, PIPELINE, STREAM, IDLE };

static struct {
    enum mode mode;
    int port;
    int connections;
    size_t size;
    int inflight;
    double duration, warmup, hold;
    int server_pid;
    int threads;
    enum check { CHECK_ALL, CHECK_SAMPLED, CHECK_SPARSE } check;
    bool splice;    // --send splice
} opt = { .mode = PINGPONG, .connections = 1, .size = 64, .inflight = 1, .duration = 5, .warmup = 1, .threads = 1 };

enum { PERIOD = 4093, READ_SIZE = 256 * 1024, WRITE_CHUNK = 64 * 1024, CONNECT_BATCH = 256, PIPE_SIZE = 256 * 1024 };
// pattern[i] == pattern[i % PERIOD]: the bytes at any stream offset are contiguous from pattern + offset % PERIOD.
static unsigned char pattern[PERIOD + READ_SIZE];

static _Atomic int phase;   // 0 warming up, 1 measuring, 2 stopping

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_seconds(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

// MARK: the server's process

/// The server's CPU time (all threads, user + system) in seconds, or -1.
static double server_cpu_seconds(int pid) {
    if (pid <= 0) return -1;
    char path[64], text[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return -1;
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = 0;
    char *after = strrchr(text, ')');   // the command name may hold spaces and parentheses
    if (after == NULL) return -1;
    unsigned long long utime = 0, stime = 0;
    // Fields 3..13 precede utime (14) and stime (15).
    if (sscanf(after + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/// The CPU time the hypervisor took from this machine (all CPUs: the steal column of /proc/stat), in seconds,
/// or -1. A round in which it took much was run on a machine with less CPU than the others.
static double machine_steal_seconds(void) {
    FILE *file = fopen("/proc/stat", "r");
    if (file == NULL) return -1;
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
    int fields = fscanf(file, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system, &idle, &iowait, &irq, &softirq, &steal);
    fclose(file);
    return fields == 8 ? (double)steal / (double)sysconf(_SC_CLK_TCK) : -1;
}

/// VmRSS of the server in KiB, or -1.
static long server_rss_kib(int pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return -1;
    long rss = -1;
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, "VmRSS:", 6) == 0) { rss = strtol(line + 6, NULL, 10); break; }
    }
    fclose(file);
    return rss;
}

/// The number of descriptors the server has open, or -1.
static int server_fd_count(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *dir = opendir(path);
    if (dir == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) if (entry->d_name[0] != '.') count++;
    closedir(dir);
    return count;
}

// MARK: connecting

/// Connects `count` sockets to 127.0.0.1:port, at most CONNECT_BATCH handshakes at a time. Failed slots
/// hold -1. Returns the number connected.
static int connect_all(int *fds, int count, uint64_t *errors) {
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    int next = 0, pending = 0, connected = 0;
    while (next < count || pending > 0) {
        while (pending < CONNECT_BATCH && next < count) {
            int i = next++;
            fds[i] = -1;
            int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) { fprintf(stderr, "loadgen: socket: %s\n", strerror(errno)); (*errors)++; continue; }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) { fds[i] = fd; connected++; continue; }
            if (errno != EINPROGRESS) { fprintf(stderr, "loadgen: connect: %s\n", strerror(errno)); close(fd); (*errors)++; continue; }
            struct epoll_event event = { .events = EPOLLOUT, .data.u32 = (uint32_t)i };
            if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event) != 0) die("epoll_ctl");
            fds[i] = fd;
            pending++;
        }
        if (pending == 0) continue;
        struct epoll_event events[CONNECT_BATCH];
        int ready = epoll_wait(ep, events, CONNECT_BATCH, 10000);
        if (ready < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        if (ready == 0) {
            fprintf(stderr, "loadgen: %d connects still pending after 10 s\n", pending);
            for (int i = 0; i < next; i++) {
                // Pending ones are those still registered: EPOLL_CTL_DEL succeeds only for them.
                if (fds[i] >= 0 && epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL) == 0) { close(fds[i]); fds[i] = -1; (*errors)++; }
            }
            pending = 0;
            continue;
        }
        for (int k = 0; k < ready; k++) {
            int i = (int)events[k].data.u32;
            int error = 0;
            socklen_t length = sizeof error;
            getsockopt(fds[i], SOL_SOCKET, SO_ERROR, &error, &length);
            epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
            pending--;
            if (error != 0) {
                fprintf(stderr, "loadgen: connect: %s\n", strerror(error));
                close(fds[i]);
                fds[i] = -1;
                (*errors)++;
            } else {
                connected++;
            }
        }
    }
    close(ep);
    return connected;
}

// MARK: the load

struct conn {
    int fd;
    int id;
    bool out_armed;
    uint64_t queued, sent, received;   // bytes
    uint64_t started, done;            // messages
    uint64_t *stamps;                  // queue time of each message in flight, by message number % inflight
    uint32_t reads;                    // reads so far: with --check sampled or sparse, every 16th is checked whole
    int pipe[2];                       // --send splice: the pattern's pages go through this pipe
    uint64_t piped;                    // bytes in the pipe, not yet in the socket
};

struct worker {
    pthread_t thread;
    int ep;
    struct conn *conns;
    int count;
    unsigned char *buffer;
    uint32_t *latencies;               // nanoseconds, measured period only
    size_t latency_count, latency_capacity;
    uint64_t messages, bytes, errors;  // measured period only (errors: always)
};

static void record_latency(struct worker *w, uint64_t ns) {
    if (w->latency_count == w->latency_capacity) {
        if (w->latency_capacity >= ((size_t)1 << 28)) return;
        w->latency_capacity = w->latency_capacity ? w->latency_capacity * 2 : 1 << 16;
        w->latencies = realloc(w->latencies, w->latency_capacity * sizeof *w->latencies);
        if (w->latencies == NULL) die("realloc");
    }
    w->latencies[w->latency_count++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static void conn_fail(struct worker *w, struct conn *c, const char *why) {
    static _Atomic int reported;
    if (atomic_fetch_add(&reported, 1) < 5) fprintf(stderr, "loadgen: connection %d: %s\n", c->id, why);
    w->errors++;
    epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->pipe[0] >= 0) { close(c->pipe[0]); close(c->pipe[1]); c->pipe[0] = c->pipe[1] = -1; }
}

static void set_write_interest(struct worker *w, struct conn *c, bool wanted) {
    if (c->out_armed == wanted) return;
    struct epoll_event event = { .events = EPOLLIN | (wanted ? EPOLLOUT : 0), .data.ptr = c };
    epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &event);
    c->out_armed = wanted;
}

/// Queues new messages until `inflight` are outstanding.
static void fill(struct conn *c, uint64_t t) {
    while (c->started - c->done < (uint64_t)opt.inflight) {
        c->stamps[c->started % (uint64_t)opt.inflight] = t;
        c->started++;
        c->queued += opt.size;
    }
}

/// --send splice: the pattern's pages are referenced into the pipe (vmsplice, no copy; the pattern never
/// changes) and moved from there into the socket (splice), so that sending costs the generator no copy.
/// Returns false when the socket is full (write interest armed) or the connection failed.
static bool splice_some(struct worker *w, struct conn *c, uint64_t left) {
    if (c->piped == 0) {
        struct iovec span = { pattern + (c->sent + (uint64_t)c->id * 17) % PERIOD, left > PIPE_SIZE ? PIPE_SIZE : (size_t)left };
        ssize_t n = vmsplice(c->pipe[1], &span, 1, SPLICE_F_NONBLOCK);
        if (n < 0) { if (errno == EINTR) return true; conn_fail(w, c, strerror(errno)); return false; }
        c->piped = (uint64_t)n;
    }
    ssize_t n = splice(c->pipe[0], NULL, c->fd, NULL, (size_t)c->piped, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n < 0) {
        if (errno == EINTR) return true;
        if (errno == EAGAIN || errno == EWOULDBLOCK) { set_write_interest(w, c, true); return false; }
        conn_fail(w, c, strerror(errno));
        return false;
    }
    c->piped -= (uint64_t)n;
    c->sent += (uint64_t)n;
    return true;
}

/// Sends what is queued until the socket is full.
static void pump(struct worker *w, struct conn *c) {
    while (c->sent < c->queued) {
        if (opt.splice) {
            if (!splice_some(w, c, c->queued - c->sent)) return;
            continue;
        }
        uint64_t left = c->queued - c->sent;
        size_t chunk = left > WRITE_CHUNK ? WRITE_CHUNK : (size_t)left;
        ssize_t n = send(c->fd, pattern + (c->sent + (uint64_t)c->id * 17) % PERIOD, chunk, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) { set_write_interest(w, c, true); return; }
            conn_fail(w, c, strerror(errno));
            return;
        }
        c->sent += (uint64_t)n;
    }
    set_write_interest(w, c, false);
}

enum { CHECK_WINDOW = 64, CHECK_STRIDE = 4096, CHECK_EVERY = 16 };

/// Whether the N bytes just read into `buffer` are the pattern at the connection's offset: all of them, or
/// with --check sampled (but for one read in CHECK_EVERY) windows at the start, every CHECK_STRIDE bytes and
/// at the end.
static bool echo_matches(struct conn *c, const unsigned char *buffer, size_t n, bool whole) {
    const unsigned char *expected = pattern + (c->received + (uint64_t)c->id * 17) % PERIOD;
    if (whole || n <= 2 * CHECK_WINDOW) return memcmp(buffer, expected, n) == 0;
    for (size_t at = 0; at + CHECK_WINDOW <= n; at += CHECK_STRIDE) {
        if (memcmp(buffer + at, expected + at, CHECK_WINDOW) != 0) return false;
    }
    return memcmp(buffer + n - CHECK_WINDOW, expected + n - CHECK_WINDOW, CHECK_WINDOW) == 0;
}

static void readable(struct worker *w, struct conn *c, bool measuring) {
    bool whole = opt.check == CHECK_ALL || c->reads++ % CHECK_EVERY == 0;
    // --check sparse: a read that is not checked whole is discarded in the kernel (MSG_TRUNC on a TCP socket
    // drops the bytes without copying them out), so the generator spends no copy on it.
    bool discard = opt.check == CHECK_SPARSE && !whole;
    ssize_t n = recv(c->fd, discard ? NULL : w->buffer, READ_SIZE, discard ? MSG_TRUNC : 0);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        conn_fail(w, c, n == 0 ? "the server closed the connection" : strerror(errno));
        return;
    }
    if (c->received + (uint64_t)n > c->sent || (!discard && !echo_matches(c, w->buffer, (size_t)n, whole))) {
        conn_fail(w, c, "the echo differs from what was sent");
        return;
    }
    c->received += (uint64_t)n;
    if (measuring) w->bytes += (uint64_t)n;
    uint64_t done = c->received / opt.size;
    if (done == c->done) return;
    uint64_t t = now_ns();
    for (uint64_t m = c->done; m < done; m++) {
        if (measuring) {
            w->messages++;
            record_latency(w, t - c->stamps[m % (uint64_t)opt.inflight]);
        }
    }
    c->done = done;
    fill(c, t);
    pump(w, c);
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    uint64_t t = now_ns();
    for (int i = 0; i < w->count; i++) {
        fill(&w->conns[i], t);
        pump(w, &w->conns[i]);
    }
    struct epoll_event events[512];
    int current;
    while ((current = atomic_load_explicit(&phase, memory_order_relaxed)) != 2) {
        int ready = epoll_wait(w->ep, events, 512, 20);
        if (ready < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        bool measuring = atomic_load_explicit(&phase, memory_order_relaxed) == 1;
        for (int k = 0; k < ready; k++) {
            struct conn *c = events[k].data.ptr;
            if (c->fd < 0) continue;
            if (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) readable(w, c, measuring);
            if (c->fd >= 0 && (events[k].events & EPOLLOUT)) pump(w, c);
        }
    }
    return NULL;
}

static int compare_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile_us(const uint32_t *sorted, size_t count, double q) {
    if (count == 0) return -1;
    size_t rank = (size_t)(q * (double)count + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > count) rank = count;
    return sorted[rank - 1] / 1000.0;
}

static const char *mode_name(enum mode mode) {
    switch (mode) {
    case PINGPONG: return "pingpong";
    case PIPELINE: return "pipeline";
    case STREAM: return "stream";
    case IDLE: return "idle";
    }
    return "?";
}

static const char *check_name(enum check check) {
    switch (check) {
    case CHECK_ALL: return "all";
    case CHECK_SAMPLED: return "sampled";
    case CHECK_SPARSE: return "sparse";
    }
    return "?";
}

static void raise_descriptor_limit(int wanted) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    if (limit.rlim_cur >= (rlim_t)wanted) return;
    struct rlimit raised = { (rlim_t)wanted, limit.rlim_max > (rlim_t)wanted ? limit.rlim_max : (rlim_t)wanted };
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return;   // a raised hard limit needs CAP_SYS_RESOURCE
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
}

static int run_idle(void) {
    uint64_t errors = 0;
    long rss_before = server_rss_kib(opt.server_pid);
    int fds_before = server_fd_count(opt.server_pid);
    int *fds = calloc((size_t)opt.connections, sizeof *fds);
    if (fds == NULL) die("calloc");
    uint64_t t0 = now_ns();
    int connected = connect_all(fds, opt.connections, &errors);
    double connect_s = (double)(now_ns() - t0) / 1e9;
    // Wait until the server has accepted them all (its descriptor count), then let it settle.
    int fds_after = server_fd_count(opt.server_pid);
    for (int tries = 0; tries < 400 && fds_after >= 0 && fds_after < fds_before + connected; tries++) {
        sleep_seconds(0.05);
        fds_after = server_fd_count(opt.server_pid);
    }
    if (fds_after < fds_before + connected) {
        fprintf(stderr, "loadgen: the server holds %d descriptors, expected %d\n", fds_after, fds_before + connected);
        errors++;
    }
    sleep_seconds(0.3);
    long rss_after = server_rss_kib(opt.server_pid);
    double per_connection = connected > 0 ? (double)(rss_after - rss_before) * 1024.0 / connected : -1;
    printf("{\"mode\":\"idle\",\"connections\":%d,\"connected\":%d,\"connect_s\":%.3f,\"rss_before_kib\":%ld,"
           "\"rss_after_kib\":%ld,\"bytes_per_connection\":%.1f,\"server_fds_before\":%d,\"server_fds_after\":%d,"
           "\"errors\":%llu}\n",
           opt.connections, connected, connect_s, rss_before, rss_after, per_connection, fds_before, fds_after,
           (unsigned long long)errors);
    fflush(stdout);
    sleep_seconds(opt.hold);
    return 0;
}

static int usage(void) {
    fprintf(stderr,
            "usage: loadgen --port PORT [--mode pingpong|pipeline|stream|idle] [--connections N] [--size BYTES]\n"
            "               [--inflight K] [--duration SECONDS] [--warmup SECONDS] [--threads N]\n"
            "               [--server-pid PID] [--hold SECONDS (idle)] [--check all|sampled|sparse]\n"
            "               [--send copy|splice]\n"
            "Connects to 127.0.0.1:PORT only. Prints one JSON line.\n");
    return 2;
}

int main(int argc, char **argv) {
    bool size_given = false, inflight_given = false, check_given = false;
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        if (i + 1 >= argc) return usage();
        const char *value = argv[++i];
        if (strcmp(name, "--mode") == 0) {
            if (strcmp(value, "pingpong") == 0) opt.mode = PINGPONG;
            else if (strcmp(value, "pipeline") == 0) opt.mode = PIPELINE;
            else if (strcmp(value, "stream") == 0) opt.mode = STREAM;
            else if (strcmp(value, "idle") == 0) opt.mode = IDLE;
            else return usage();
        } else if (strcmp(name, "--port") == 0) opt.port = atoi(value);
        else if (strcmp(name, "--connections") == 0) opt.connections = atoi(value);
        else if (strcmp(name, "--size") == 0) { opt.size = (size_t)atol(value); size_given = true; }
        else if (strcmp(name, "--inflight") == 0) { opt.inflight = atoi(value); inflight_given = true; }
        else if (strcmp(name, "--duration") == 0) opt.duration = atof(value);
        else if (strcmp(name, "--warmup") == 0) opt.warmup = atof(value);
        else if (strcmp(name, "--hold") == 0) opt.hold = atof(value);
        else if (strcmp(name, "--server-pid") == 0) opt.server_pid = atoi(value);
        else if (strcmp(name, "--threads") == 0) opt.threads = atoi(value);
        else if (strcmp(name, "--send") == 0) {
            if (strcmp(value, "copy") == 0) opt.splice = false;
            else if (strcmp(value, "splice") == 0) opt.splice = true;
            else return usage();
        } else if (strcmp(name, "--check") == 0) {
            if (strcmp(value, "all") == 0) opt.check = CHECK_ALL;
            else if (strcmp(value, "sampled") == 0) opt.check = CHECK_SAMPLED;
            else if (strcmp(value, "sparse") == 0) opt.check = CHECK_SPARSE;
            else return usage();
            check_given = true;
        } else return usage();
    }
    if (opt.mode == STREAM && !size_given) opt.size = 16 * 1024;
    if (opt.mode == STREAM && !inflight_given) opt.inflight = 8;
    if (opt.mode == STREAM && !check_given) opt.check = CHECK_SAMPLED;
    if (opt.mode == PINGPONG) opt.inflight = 1;
    if (opt.port <= 0 || opt.port > 65535 || opt.connections < 1 || opt.size < 1 || opt.inflight < 1 ||
        opt.threads < 1 || opt.duration <= 0 || opt.warmup < 0) return usage();
    if (opt.threads > opt.connections) opt.threads = opt.connections;

    signal(SIGPIPE, SIG_IGN);
    // A run that hangs (a server that stopped answering) ends by itself.
    alarm((unsigned)(opt.warmup + opt.duration + opt.hold + 120));
    raise_descriptor_limit(opt.connections + 64);
    for (size_t i = 0; i < sizeof pattern; i++) {
        size_t j = i % PERIOD;
        pattern[i] = (unsigned char)((j * 131u + (j >> 8) * 7u + 11u) & 0xff);
    }
    if (opt.mode == IDLE) {
        if (opt.server_pid <= 0) { fprintf(stderr, "loadgen: idle mode needs --server-pid\n"); return 2; }
        return run_idle();
    }

    uint64_t errors = 0;
    int *fds = calloc((size_t)opt.connections, sizeof *fds);
    struct conn *conns = calloc((size_t)opt.connections, sizeof *conns);
    uint64_t *stamps = calloc((size_t)opt.connections * (size_t)opt.inflight, sizeof *stamps);
    struct worker *workers = calloc((size_t)opt.threads, sizeof *workers);
    if (fds == NULL || conns == NULL || stamps == NULL || workers == NULL) die("calloc");
    connect_all(fds, opt.connections, &errors);

    // Connections are dealt to the workers in turn; each worker owns its connections and its epoll.
    int live = 0;
    for (int i = 0; i < opt.connections; i++) {
        if (fds[i] < 0) continue;
        conns[live] = (struct conn){ .fd = fds[i], .id = i, .stamps = stamps + (size_t)i * (size_t)opt.inflight, .pipe = { -1, -1 } };
        if (opt.splice) {
            if (pipe2(conns[live].pipe, O_CLOEXEC | O_NONBLOCK) != 0) die("pipe2");
            if (fcntl(conns[live].pipe[1], F_SETPIPE_SZ, PIPE_SIZE) < 0) die("F_SETPIPE_SZ");
        }
        live++;
    }
    for (int t = 0; t < opt.threads; t++) {
        struct worker *w = &workers[t];
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        if (w->ep < 0) die("epoll_create1");
        w->buffer = malloc(READ_SIZE);
        w->conns = calloc((size_t)live / (size_t)opt.threads + 1, sizeof *w->conns);
        if (w->buffer == NULL || w->conns == NULL) die("malloc");
    }
    for (int i = 0; i < live; i++) {
        struct worker *w = &workers[i % opt.threads];
        w->conns[w->count++] = conns[i];
    }
    for (int t = 0; t < opt.threads; t++) {
        struct worker *w = &workers[t];
        for (int i = 0; i < w->count; i++) {
            struct epoll_event event = { .events = EPOLLIN, .data.ptr = &w->conns[i] };
            if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->conns[i].fd, &event) != 0) die("epoll_ctl");
        }
        if (pthread_create(&w->thread, NULL, run_worker, w) != 0) die("pthread_create");
    }

    sleep_seconds(opt.warmup);
    double cpu0 = server_cpu_seconds(opt.server_pid);
    double steal0 = machine_steal_seconds();
    struct timespec client0, client1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &client0);
    uint64_t t0 = now_ns();
    atomic_store(&phase, 1);
    sleep_seconds(opt.duration);
    atomic_store(&phase, 2);
    uint64_t t1 = now_ns();
    double cpu1 = server_cpu_seconds(opt.server_pid);
    double steal1 = machine_steal_seconds();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &client1);
    for (int t = 0; t < opt.threads; t++) pthread_join(workers[t].thread, NULL);

    uint64_t messages = 0, bytes = 0;
    size_t latency_count = 0;
    for (int t = 0; t < opt.threads; t++) {
        messages += workers[t].messages;
        bytes += workers[t].bytes;
        errors += workers[t].errors;
        latency_count += workers[t].latency_count;
    }
    uint32_t *latencies = malloc((latency_count + 1) * sizeof *latencies);
    if (latencies == NULL) die("malloc");
    size_t filled = 0;
    for (int t = 0; t < opt.threads; t++) {
        memcpy(latencies + filled, workers[t].latencies, workers[t].latency_count * sizeof *latencies);
        filled += workers[t].latency_count;
    }
    qsort(latencies, latency_count, sizeof *latencies, compare_u32);

    double seconds = (double)(t1 - t0) / 1e9;
    double server_cpu = (cpu0 >= 0 && cpu1 >= 0) ? cpu1 - cpu0 : -1;
    double client_cpu = (double)(client1.tv_sec - client0.tv_sec) + (double)(client1.tv_nsec - client0.tv_nsec) / 1e9;
    double messages_per_s = (double)messages / seconds;
    double mb_per_s = (double)bytes / seconds / 1e6;
    printf("{\"mode\":\"%s\",\"connections\":%d,\"connected\":%d,\"size\":%zu,\"inflight\":%d,\"threads\":%d,"
           "\"check\":\"%s\",\"send\":\"%s\",\"duration_s\":%.3f,\"messages\":%llu,\"messages_per_s\":%.1f,\"mb_per_s\":%.2f,"
           "\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"errors\":%llu,"
           "\"server_cpu_s\":%.3f,\"messages_per_server_cpu_s\":%.1f,\"mb_per_server_cpu_s\":%.2f,\"client_cpu_s\":%.3f,\"steal_s\":%.3f}\n",
           mode_name(opt.mode), opt.connections, live, opt.size, opt.inflight, opt.threads,
           check_name(opt.check), opt.splice ? "splice" : "copy", seconds,
           (unsigned long long)messages, messages_per_s, mb_per_s,
           percentile_us(latencies, latency_count, 0.50), percentile_us(latencies, latency_count, 0.99),
           percentile_us(latencies, latency_count, 0.999), (unsigned long long)errors,
           server_cpu, server_cpu > 0 ? (double)messages / server_cpu : -1,
           server_cpu > 0 ? (double)bytes / server_cpu / 1e6 : -1, client_cpu,
           steal0 >= 0 && steal1 >= 0 ? steal1 - steal0 : -1);
    fflush(stdout);
    return 0;
}
