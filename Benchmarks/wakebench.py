#!/usr/bin/env python3
"""The wake soak's client: one app of netlifed put to sleep by idle detection (`idle-background`) and woken by
connections to its `on-background = wake` listener, for N cycles. A cycle: the app is suspended (the `state`
event on a `watch` connection says so); the client connects, sends a request, reads the whole answer and closes,
timing the first byte from the moment it calls connect(); the app is woken (`woken`, reason `connection`) and
is suspended again (the next `state` event to `suspended`). It counts what must never happen: a connection
refused (ECONNREFUSED), reset (ECONNRESET) or left unanswered (no whole, correct answer within --timeout, or the
end of the stream before it), and a cycle in which the app was not woken or did not go back to sleep.

While the app sleeps it samples resident memory now and then (at the first cycle, every tenth of the run and
the last): netlifed's (VmRSS of --daemon-pid) and the app's processes' (a process app: the sum over its
cgroup's processes, from `status`). After the soak the app is brought to the foreground and the same request is
timed against it awake, the reference the wake-up's figures compare with.

  --kind echo   a built-in echo app: a line out, the same line back
  --kind http   an HTTP server (nginx): GET of a small file, the status line and Content-Length's body
  --kind redis  redis-server: PING, +PONG

One JSON line on stdout. Only the standard library; every socket on the given address or the control socket,
every wait bounded. Exit status 0 even when connections were lost (the counts say so; Benchmarks/run decides),
1 when the soak could not be run at all.
"""

import argparse
import errno
import json
import os
import select
import socket
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controlbench import ControlConnection, encode, summary, wait_for_daemon  # noqa: E402


class Control:
    """Requests on the control socket, each on a connection of its own: the soak asks rarely (minutes apart for a
    slow app), and the daemon closes a control connection left idle for 60 s."""

    def __init__(self, path):
        self.path = path

    def request(self, **members):
        connection = ControlConnection(self.path)
        try:
            return connection.request(**members)[0]
        finally:
            connection.close()

    def app(self, app):
        return self.request(cmd="status", app=app)["apps"][0]


class Watch:
    """A `watch APP` connection: the app's events, one JSON object each, read with a deadline."""

    def __init__(self, path, app):
        self.connection = ControlConnection(path)
        reply, _ = self.connection.round_trip(encode({"cmd": "watch", "app": app}))
        if not json.loads(reply).get("ok"):
            raise RuntimeError(f"watch refused: {reply!r}")
        self.state = None

    def next(self, deadline):
        """The next event, or None once `deadline` (time.monotonic()) has passed."""
        connection = self.connection
        while True:
            end = connection.pending.find(b"\n")
            if end >= 0:
                line, connection.pending = connection.pending[:end], connection.pending[end + 1:]
                event = json.loads(line)
                if event.get("event") == "state":
                    self.state = event.get("to")
                return event
            ready, _, _ = select.select([connection.sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = connection.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("the daemon ended the watch")
            connection.pending += chunk

    def drain(self):
        """The events that have arrived, without waiting."""
        events = []
        while True:
            event = self.next(time.monotonic())
            if event is None:
                return events
            events.append(event)

    def until(self, predicate, seconds):
        """Reads events until one satisfies `predicate`; returns it, or None after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            event = self.next(deadline)
            if event is None or predicate(event):
                return event


def is_state(to):
    return lambda event: event.get("event") == "state" and event.get("to") == to


def is_connection_wake(event):
    return event.get("event") == "woken" and event.get("reason") == "connection"


# MARK: the request and its answer, per kind of server

class Exchange:
    """What one connection saw."""
    ANSWERED, REFUSED, RESET, UNANSWERED = "answered", "refused", "reset", "unanswered"

    def __init__(self, outcome, first_byte_ns=None, answer_ns=None, detail=""):
        self.outcome, self.first_byte_ns, self.answer_ns, self.detail = outcome, first_byte_ns, answer_ns, detail


def request_for(kind, cycle, host):
    if kind == "echo":
        return b"wake cycle %d\n" % cycle
    if kind == "http":
        return b"GET /index.txt HTTP/1.1\r\nHost: %s\r\nUser-Agent: wakebench\r\n\r\n" % host.encode()
    return b"PING\r\n"


def answer_state(kind, request, received, body):
    """None while the answer is incomplete; then "" when it is right, or what is wrong with it."""
    if kind == "echo":
        if len(received) < len(request):
            return None if request.startswith(received) else f"got {received[:80]!r}"
        return "" if received == request else f"got {received[:80]!r}"
    if kind == "redis":
        if len(received) < 7:
            return None if b"+PONG\r\n".startswith(received) else f"got {received[:80]!r}"
        return "" if received == b"+PONG\r\n" else f"got {received[:80]!r}"
    head_end = received.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    head = received[:head_end].decode("latin-1").split("\r\n")
    if not head[0].startswith("HTTP/1.1 200"):
        return f"status line {head[0]!r}"
    length = next((int(line.split(":", 1)[1]) for line in head[1:] if line.lower().startswith("content-length:")), None)
    if length is None:
        return "no Content-Length"
    got = received[head_end + 4:]
    if len(got) < length:
        return None
    return "" if got == body and len(got) == length else f"a body of {len(got)} bytes that is not the file's"


def exchange(kind, host, port, cycle, timeout, body):
    request = request_for(kind, cycle, host)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.settimeout(timeout)
    start = time.perf_counter_ns()
    try:
        try:
            client.connect((host, port))
        except ConnectionRefusedError:
            return Exchange(Exchange.REFUSED, detail="connect: ECONNREFUSED")
        except OSError as error:
            return Exchange(Exchange.UNANSWERED, detail=f"connect: {error}")
        deadline = time.monotonic() + timeout
        received, first = b"", None
        try:
            client.sendall(request)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return Exchange(Exchange.UNANSWERED, detail=f"no whole answer within {timeout} s ({len(received)} bytes)")
                client.settimeout(left)
                chunk = client.recv(1 << 16)
                if not chunk:
                    return Exchange(Exchange.UNANSWERED, detail=f"end of stream after {len(received)} bytes")
                if first is None:
                    first = time.perf_counter_ns() - start
                received += chunk
                verdict = answer_state(kind, request, received, body)
                if verdict is None:
                    continue
                if verdict:
                    return Exchange(Exchange.UNANSWERED, detail=verdict)
                return Exchange(Exchange.ANSWERED, first, time.perf_counter_ns() - start)
        except ConnectionResetError:
            return Exchange(Exchange.RESET, detail="ECONNRESET")
        except socket.timeout:
            return Exchange(Exchange.UNANSWERED, detail=f"no whole answer within {timeout} s ({len(received)} bytes)")
        except OSError as error:
            outcome = Exchange.RESET if error.errno in (errno.ECONNRESET, errno.EPIPE) else Exchange.UNANSWERED
            return Exchange(outcome, detail=str(error))
    finally:
        client.close()


# MARK: memory

def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def app_pids(control, app):
    """The processes of a process app's cgroup (its program's pid alone without one); none for a built-in app."""
    program = control.app(app).get("program")
    if not program:
        return []
    cgroup = program.get("cgroup")
    if cgroup:
        try:
            with open(os.path.join(cgroup, "cgroup.procs")) as procs:
                return [int(line) for line in procs if line.strip()]
        except OSError:
            pass
    return [program["pid"]] if program.get("pid") else []


def sample_memory(control, app, daemon_pid, cycle, samples):
    pids = app_pids(control, app)
    samples.append({"cycle": cycle, "netlifed_kib": rss_kib(daemon_pid),
                    "app_kib": sum(rss_kib(pid) for pid in pids) if pids else None, "app_processes": len(pids)})


def memory_summary(samples):
    def side(key):
        values = [s[key] for s in samples if s[key] is not None]
        if not values:
            return None
        return {"first": values[0], "last": values[-1], "max": max(values)}
    return {"netlifed_kib": side("netlifed_kib"), "app_kib": side("app_kib"),
            "app_processes": samples[-1]["app_processes"] if samples else None, "samples": samples}


# MARK: the soak

def run(args):
    body = open(args.body_file, "rb").read() if args.body_file else b""
    wait_for_daemon(args.control).close()
    control = Control(args.control)
    watch = Watch(args.control, args.app)
    started = time.monotonic()

    # Put to sleep by idle detection: active, unused for idle-background, then background and suspended.
    state = control.app(args.app)["state"]
    watch.state = state
    if state != "suspended":
        if watch.until(is_state("suspended"), args.idle_wait) is None:
            raise RuntimeError(f"the app did not go to sleep by itself within {args.idle_wait} s (it is {watch.state})")
    idle_sleep_s = time.monotonic() - started

    counts = {Exchange.REFUSED: 0, Exchange.RESET: 0, Exchange.UNANSWERED: 0}
    not_woken, first_bytes, answers, resleeps, failures, memory = 0, [], [], [], [], []
    checkpoints = {0, args.cycles - 1} | {args.cycles * k // 10 for k in range(1, 10)}
    soak_started = time.monotonic()
    ran = args.cycles
    for cycle in range(args.cycles):
        if cycle in checkpoints:
            sample_memory(control, args.app, args.daemon_pid, cycle, memory)
        result = exchange(args.kind, args.host, args.port, cycle, args.timeout, body)
        closed = time.perf_counter_ns()
        if result.outcome == Exchange.ANSWERED:
            first_bytes.append(result.first_byte_ns)
            answers.append(result.answer_ns)
        else:
            counts[result.outcome] += 1
            if len(failures) < 20:
                failures.append({"cycle": cycle, "outcome": result.outcome, "detail": result.detail})
        if sum(counts.values()) >= args.give_up_after:
            ran = cycle + 1
            break
        # A refused connection woke nothing; one that came through woke the app, which goes back to sleep:
        # woken, then suspended.
        if result.outcome == Exchange.REFUSED:
            continue
        woken = watch.until(is_connection_wake, args.sleep_wait)
        slept = watch.until(is_state("suspended"), args.sleep_wait) if woken else None
        if woken is None:
            not_woken += 1
            if len(failures) < 20:
                failures.append({"cycle": cycle, "outcome": "not-woken", "detail": f"the app stayed {watch.state}"})
            if control.app(args.app)["state"] != "suspended":
                raise RuntimeError(f"cycle {cycle}: the app is {watch.state}, neither woken by the connection nor asleep")
        elif slept is None:
            raise RuntimeError(f"cycle {cycle}: the app did not go back to sleep within {args.sleep_wait} s (it is {watch.state})")
        else:
            resleeps.append(time.perf_counter_ns() - closed)
    soak_s = time.monotonic() - soak_started

    # The reference: the same request to the app awake, in the foreground. A process app's connections are not
    # use to idle detection, so it may leave the foreground again within idle-background: only the samples taken
    # while no state event came count.
    reference = []
    control.request(cmd="foreground", app=args.app)
    watch.drain()
    for sample in range(args.reference_samples):
        result = exchange(args.kind, args.host, args.port, args.cycles + sample, args.timeout, body)
        if any(event.get("event") == "state" for event in watch.drain()):
            break
        if result.outcome == Exchange.ANSWERED:
            reference.append(result.first_byte_ns)

    lost = sum(counts.values())
    print(json.dumps({
        "scenario": "wake",
        "kind": args.kind,
        "cycles": args.cycles,
        "cycles_run": ran,
        "answered": len(first_bytes),
        "refused": counts[Exchange.REFUSED],
        "reset": counts[Exchange.RESET],
        "unanswered": counts[Exchange.UNANSWERED],
        "not_woken": not_woken,
        "lost": lost,
        "errors": lost + not_woken,
        "loss": (f"{counts[Exchange.REFUSED]} refused, {counts[Exchange.RESET]} reset, {counts[Exchange.UNANSWERED]} "
                 f"unanswered, {not_woken} not woken in {ran} cycles"
                 f"{' (given up)' if ran < args.cycles else ''}; the first: {failures[:3]}"),
        "failures": failures,
        "first_byte_ms": summary(first_bytes, "ms") if first_bytes else None,
        "answer_ms": summary(answers, "ms") if answers else None,
        "resleep_ms": summary(resleeps, "ms") if resleeps else None,
        "awake_first_byte_ms": summary(reference, "ms") if reference else None,
        "idle_sleep_s": round(idle_sleep_s, 3),
        "soak_s": round(soak_s, 1),
        "cycles_per_s": round(ran / soak_s, 1) if soak_s else None,
        "memory_asleep": memory_summary(memory),
    }), flush=True)
    watch.connection.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--control", required=True, help="netlifed's control socket")
    parser.add_argument("--app", default="bench")
    parser.add_argument("--kind", required=True, choices=["echo", "http", "redis"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cycles", type=int, default=10000)
    parser.add_argument("--daemon-pid", type=int, required=True)
    parser.add_argument("--body-file", help="http: the file GET /index.txt must return")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds a connection may take to be answered")
    parser.add_argument("--idle-wait", type=float, default=30.0, help="seconds for idle detection to put the app to sleep")
    parser.add_argument("--sleep-wait", type=float, default=10.0, help="seconds for each wake-up and return to sleep")
    parser.add_argument("--reference-samples", type=int, default=200)
    parser.add_argument("--give-up-after", type=int, default=20,
                        help="stop after this many lost connections: the soak has failed by then")
    args = parser.parse_args()
    if args.kind == "http" and not args.body_file:
        parser.error("--kind http needs --body-file")
    try:
        run(args)
    except (RuntimeError, OSError) as error:
        traceback.print_exc(file=sys.stderr)
        print(f"wakebench: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
