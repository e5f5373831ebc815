// Benchmarks/listener-floor.c: the cost of the system calls alone when 1,000 listeners close and reopen on
// their ports (close; socket, setsockopt, bind, listen, epoll_ctl), as `background` and `foreground` make them,
// each kind of call timed on its own: `socket` + `setsockopt` is what netlifed now does in the background,
// ahead of the reopen, and `bind` + `listen` + `epoll_ctl` what is left for `foreground`.
// cc -O2 -o /tmp/listener-floor Benchmarks/listener-floor.c && /tmp/listener-floor
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
int main(void) {
    enum { N = 1000 };
    int fds[N]; unsigned short ports[N];
    int ep = epoll_create1(0);
    for (int i = 0; i < N; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1; setsockopt(fds[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 }; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(fds[i], (struct sockaddr *)&a, sizeof a); listen(fds[i], 511);
        socklen_t l = sizeof a; getsockname(fds[i], (struct sockaddr *)&a, &l); ports[i] = a.sin_port;
        struct epoll_event e = { .events = EPOLLIN, .data.fd = fds[i] }; epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
    }
    for (int round = 0; round < 10; round++) {
        double t0 = now();
        for (int i = 0; i < N; i++) { epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL); close(fds[i]); }
        double t1 = now();
        for (int i = 0; i < N; i++) {
            fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            int one = 1; setsockopt(fds[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        }
        double t2 = now();
        for (int i = 0; i < N; i++) {
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = ports[i] }; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (bind(fds[i], (struct sockaddr *)&a, sizeof a) != 0) perror("bind");
        }
        double t3 = now();
        for (int i = 0; i < N; i++) listen(fds[i], 511);
        double t4 = now();
        for (int i = 0; i < N; i++) {
            struct epoll_event e = { .events = EPOLLIN, .data.fd = fds[i] }; epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
        }
        double t5 = now();
        printf("%d listeners: close %.2f ms; reopen %.2f ms = socket+setsockopt %.2f, bind %.2f, listen %.2f, epoll_ctl %.2f\n",
               N, t1 - t0, t5 - t1, t2 - t1, t3 - t2, t4 - t3, t5 - t4);
    }
    return 0;
}
