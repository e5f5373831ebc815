#!/usr/bin/python3
"""A reference client of netlifed's lifecycle protocol for Python programs (standard library only).

netlifed starts a process app's program (`[app NAME]` with `exec = ...`) with its listeners at descriptors
3, 4, ... (systemd's socket activation: LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES) and, after them, its end of
a socket for lifecycle events, whose number is in NETLIFE_EVENTS: one JSON object a line, the full message set
in the header of Sources/NetLife/ProcessApps/LifecycleChannel.swift. A program opts in with {"hello": 1}; then each
stage of a transition arrives as
    {"event": "did-enter-background", "budget_ms": 5000, "listeners": "stop-polling"}
and must be answered {"done": "did-enter-background"} within budget_ms, or the watchdog kills the program
with its whole cgroup. "stop-polling": netlifed has shut the listeners down (connects are refused) and epoll
reports them ready without pause, so stop polling them until a stage says "resume-polling". A program that
never says hello still runs, and is frozen as soon as it is in the background.

As a module:
    listeners = listen_sockets()                   # [(name, socket)], non-blocking
    channel = LifecycleChannel.from_environment()  # None when not run by netlifed
    channel.on("did-enter-background", handler)    # handler(message); return False to answer later
    channel.hello()                                # then call channel.readable() whenever it is readable

As a program: a socket-activated line-echo server (one thread, selectors) that speaks the protocol. Knobs for
netlife's tests, all optional:
    NETLIFE_DEMO_IGNORE=EVENT      never answer EVENT (did-enter-background: the watchdog kills the app)
    NETLIFE_DEMO_DELAY=SECONDS     answer each stage SECONDS late (the transition waits for the answer)
    NETLIFE_DEMO_CRASH_AFTER=N     exit with status 3 after echoing the first line of the N-th connection
    NETLIFE_DEMO_TASK=SECONDS      begin a background task on did-enter-background, end it SECONDS later
    NETLIFE_DEMO_FORK=1            start `sleep 60` in a session of its own (it stays in the app's cgroup)
"""

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

STAGES = ("did-finish-launching", "will-resign-active", "did-enter-background",
          "will-enter-foreground", "did-become-active", "will-terminate")


def listen_sockets():
    """The listening sockets handed over by socket activation, as [(name, socket)], non-blocking and not
    inherited by children. Empty when LISTEN_PID names another process (the variables were not for us)."""
    try:
        count, pid = int(os.environ.get("LISTEN_FDS", "0")), int(os.environ.get("LISTEN_PID", "0"))
    except ValueError:
        return []
    names = os.environ.get("LISTEN_FDNAMES", "").split(":")
    for key in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        os.environ.pop(key, None)       # as sd_listen_fds(1): children must not take them for theirs
    if pid != os.getpid():
        return []
    sockets = [socket.socket(fileno=3 + index) for index in range(count)]
    for sock in sockets:
        sock.set_inheritable(False)
        sock.setblocking(False)
    return [(names[i] if i < len(names) and names[i] else "unknown", sock) for i, sock in enumerate(sockets)]


class LifecycleChannel:
    """The program's end of netlifed's lifecycle socket. Not thread-safe: use it from the thread that polls."""

    MAX_LINE = 4096                     # netlifed's limit for a line, either way

    def __init__(self, sock):
        self.sock = sock
        self.handlers = {}
        self.tasks = set()              # ids of tasks begun here and not yet ended
        self.task_callbacks = []        # callbacks of begin-task requests not yet answered (answers come in order)
        self.buffer = b""
        self.closed = False

    @classmethod
    def from_environment(cls):
        """The channel named by NETLIFE_EVENTS, or None."""
        value = os.environ.pop("NETLIFE_EVENTS", None)
        if not value:
            return None
        sock = socket.socket(fileno=int(value))
        sock.set_inheritable(False)
        return cls(sock)

    def fileno(self):
        return self.sock.fileno()

    def on(self, event, handler):
        """Calls handler(message) when EVENT arrives: a stage name, or "task-expiring". The stage is answered
        with done when the handler returns; a handler that returns False answers later itself, with done().
        Without a handler a stage is answered at once and an expiring task is ended."""
        self.handlers[event] = handler

    def hello(self):
        self._send({"hello": 1})

    def done(self, event, task=None):
        self._send({"done": event} if task is None else {"done": event, "task": task})

    def begin_task(self, name, callback):
        """Asks for a background task; callback(task_id) gets its id, 0 when netlifed refused it."""
        self.task_callbacks.append(callback)
        self._send({"begin-task": name})

    def end_task(self, task_id):
        if task_id in self.tasks:       # ending an ended task would be a protocol error
            self.tasks.discard(task_id)
            self._send({"end-task": task_id})

    def declare_voip(self, fd):
        """Reclaim will spare the socket of descriptor FD (a VoIP connection)."""
        self._send({"voip": fd})

    def readable(self):
        """Reads what netlifed sent and handles every complete line. False once the channel is over."""
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:                 # ECONNRESET: as an end
            data = b""
        if not data:
            self.closed = True
            return False
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                self._handle(json.loads(line))
        if len(self.buffer) > self.MAX_LINE:
            raise ValueError("netlifed sent a line longer than %d bytes" % self.MAX_LINE)
        return True

    def _handle(self, message):
        if "event" in message:
            handler = self.handlers.get(message["event"])
            if handler is None or handler(message) is not False:
                self.done(message["event"])
        elif "task-expiring" in message:
            handler = self.handlers.get("task-expiring")
            if handler is None:
                self.end_task(message["task-expiring"])
            elif handler(message) is not False:
                self.done("task-expiring", message["task-expiring"])
        elif "task" in message:
            task_id = message["task"]
            if task_id:
                self.tasks.add(task_id)
            self.task_callbacks.pop(0)(task_id)
        elif "error" in message:
            print("netlife_events: netlifed says: %s" % message["error"], file=sys.stderr, flush=True)
        # {"hello": 1} and {"voip": FD} only confirm a request.

    def _send(self, message):
        try:
            if not self.closed:
                self.sock.sendall((json.dumps(message) + "\n").encode())
        except OSError:
            self.closed = True


class EchoServer:
    """The demo: echoes each line back on every connection of every handed listener."""

    def __init__(self, listeners, channel):
        self.selector = selectors.DefaultSelector()
        self.listeners = [sock for _, sock in listeners]
        self.channel = channel
        self.timers = []                # (monotonic deadline, callback)
        self.connections = {}           # socket -> [number, input bytes, output bytes]
        self.accepted = 0
        self.polling = False
        self.ignore = os.environ.get("NETLIFE_DEMO_IGNORE")
        self.crash_after = int(os.environ.get("NETLIFE_DEMO_CRASH_AFTER", "0"))
        self.task_seconds = float(os.environ.get("NETLIFE_DEMO_TASK", "0"))
        self.delay = float(os.environ.get("NETLIFE_DEMO_DELAY", "0"))
        self.poll_listeners(True)
        if channel:
            for stage in STAGES:
                channel.on(stage, self.stage)
            self.selector.register(channel, selectors.EVENT_READ, self.channel_readable)
            channel.hello()

    def poll_listeners(self, on):
        if on == self.polling:
            return
        self.polling = on
        for sock in self.listeners:
            if on:
                self.selector.register(sock, selectors.EVENT_READ, self.accept)
            else:
                self.selector.unregister(sock)

    def stage(self, message):
        event, hint = message["event"], message.get("listeners")
        print("netlife-demo: %s budget_ms=%s listeners=%s" % (event, message.get("budget_ms"), hint or "-"), flush=True)
        if hint in ("stop-polling", "resume-polling"):
            self.poll_listeners(hint == "resume-polling")
        if event == "did-enter-background" and self.task_seconds > 0:
            self.channel.begin_task("demo", self.task_begun)
        if event == self.ignore:
            return False                # never answered: the watchdog will act
        if self.delay > 0:              # answered later, from a timer: the stage waits for it
            self.timers.append((time.monotonic() + self.delay, lambda: self.channel.done(event)))
            return False
        return True

    def task_begun(self, task_id):
        print("netlife-demo: task %d begun" % task_id, flush=True)
        if task_id:
            self.timers.append((time.monotonic() + self.task_seconds, lambda: self.channel.end_task(task_id)))

    def channel_readable(self, channel, mask):
        if not channel.readable():      # netlifed closed it: go on without the protocol
            self.selector.unregister(channel)

    def accept(self, listener, mask):
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:                 # shut down by netlifed ahead of its stop-polling: wait for resume
            return self.poll_listeners(False)
        conn.setblocking(False)
        self.accepted += 1
        self.connections[conn] = [self.accepted, b"", b""]
        self.selector.register(conn, selectors.EVENT_READ, self.serve)

    def serve(self, conn, mask):
        state = self.connections[conn]
        if mask & selectors.EVENT_READ:
            try:
                data = conn.recv(65536)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:             # ECONNRESET (reclaimed while suspended), ...
                data = b""
            if data == b"" or len(state[1]) > 65536:
                return self.drop(conn)
            if data:
                lines, _, state[1] = (state[1] + data).rpartition(b"\n")
                if lines:
                    state[2] += lines + b"\n"
        if state[2]:
            try:
                state[2] = state[2][conn.send(state[2]):]
            except (BlockingIOError, InterruptedError):
                pass                    # the rest when the socket is writable again
            except OSError:
                return self.drop(conn)
            if state[0] == self.crash_after and not state[2]:
                print("netlife-demo: crashing on purpose after connection %d" % state[0], flush=True)
                sys.exit(3)
        self.selector.modify(conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if state[2] else 0), self.serve)

    def drop(self, conn):
        self.selector.unregister(conn)
        del self.connections[conn]
        conn.close()

    def run(self):
        while True:
            timeout = max(0, min(t for t, _ in self.timers) - time.monotonic()) if self.timers else None
            for key, mask in self.selector.select(timeout):
                key.data(key.fileobj, mask)
            now = time.monotonic()
            due = [timer for timer in self.timers if timer[0] <= now]
            self.timers = [timer for timer in self.timers if timer[0] > now]
            for _, callback in due:
                callback()


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listeners = listen_sockets()
    if not listeners:
        sys.exit("netlife-demo: no listeners (run it from netlifed: [app] exec = ..., [listener] address = ...)")
    if os.environ.get("NETLIFE_DEMO_FORK") == "1":
        child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        print("netlife-demo: started sleep, pid %d" % child.pid, flush=True)
    channel = LifecycleChannel.from_environment()
    print("netlife-demo: pid %d, %d listener(s), protocol %s"
          % (os.getpid(), len(listeners), "on" if channel else "off"), flush=True)
    EchoServer(listeners, channel).run()


if __name__ == "__main__":
    main()
