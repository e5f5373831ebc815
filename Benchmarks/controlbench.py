#!/usr/bin/env python3
"""Clients of netlifed's control socket for the benchmark: they speak the protocol directly (one JSON object
per line each way on the Unix socket), never through netlifectl, and time each request from the first byte
sent to the reply's newline (time.perf_counter_ns). Python's own cost per round trip is a few tens of
microseconds; the `version` round trip, printed next to `status`, shows that floor.

  lifecycle  an app with many listeners: open connections spread over them, then time `background`,
             the first ECONNREFUSED after its reply, `foreground`, `suspend` and `foreground` from suspended
  control    `status` round trips (optionally after waiting for a load to warm up)
  voip       the peer of a VoIP [socket]: listen, take the daemon's connection, suspend the app, send a line,
             and poll `status` until it shows the app woken; every other wake-up is timed instead to the
             `woken` event on a watch connection
  metrics    `/metrics` scrapes of many apps by curl (a C client, so that the client's pace is not Python's),
             each timed to its last byte, with `status` of one app every 10 ms meanwhile; the loop turns over
             5 ms during the scrapes (the daemon's own netlife_loop_turn_duration_seconds, before and after), and
             the daemon's account of each scrape's work (its debug log)

Each prints one JSON line on stdout. Only the standard library is used. Every socket is on 127.0.0.1 or the
given Unix socket, and every wait is bounded.
"""

import argparse
import errno
import http.client
import json
import re
import resource
import socket
import subprocess
import sys
import threading
import time


class ControlConnection:
    """One connection to the control socket; requests and replies are single lines."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.pending = b""

    def round_trip(self, line):
        """Sends `line` (bytes ending in a newline) and returns (reply bytes, nanoseconds)."""
        start = time.perf_counter_ns()
        self.sock.sendall(line)
        while True:
            end = self.pending.find(b"\n")
            if end >= 0:
                elapsed = time.perf_counter_ns() - start
                reply, self.pending = self.pending[:end], self.pending[end + 1:]
                return reply, elapsed
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                raise RuntimeError("the daemon closed the control connection")
            self.pending += chunk

    def request(self, **members):
        """Sends a request and returns (decoded reply, nanoseconds); a refusal is an exception."""
        reply, elapsed = self.round_trip(encode(members))
        value = json.loads(reply)
        if not value.get("ok"):
            raise RuntimeError(f"{members.get('cmd')} refused: {value.get('error')}")
        return value, elapsed

    def close(self):
        self.sock.close()


def encode(members):
    return json.dumps(members, separators=(",", ":")).encode() + b"\n"


def wait_for_daemon(path, seconds=20.0):
    deadline = time.monotonic() + seconds
    while True:
        try:
            connection = ControlConnection(path)
            connection.request(cmd="version")
            return connection
        except (OSError, RuntimeError):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no daemon answers on {path}")
            time.sleep(0.02)


def percentile(values, q):
    """The nearest-rank percentile of `values` (q in 0..1)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(q * len(ordered) + 0.999999)))
    return ordered[rank - 1]


def summary(nanoseconds, unit):
    """p50, p99 and max of a list of durations in `unit` ('ms' or 'us'), and the values themselves (the
    benchmark pools them over its rounds)."""
    scale = 1e6 if unit == "ms" else 1e3
    values = [v / scale for v in nanoseconds]
    return {
        "p50": round(percentile(values, 0.50), 4),
        "p99": round(percentile(values, 0.99), 4),
        "max": round(max(values), 4),
        "samples": len(values),
        "values": [round(v, 4) for v in values],
    }


def raise_descriptor_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def app_status(control, app):
    value, _ = control.request(cmd="status", app=app)
    return value["apps"][0]


def listener_ports(status):
    ports = []
    for listener in status["listeners"]:
        host, _, port = listener["address"].rpartition(":")
        if host != "127.0.0.1":
            raise RuntimeError(f"listener {listener['name']} is on {listener['address']}, not 127.0.0.1")
        ports.append(int(port))
    return ports


# MARK: lifecycle

def first_refusal_ns(port, since_ns, limit_s=1.0):
    """Connects to 127.0.0.1:port until it is refused; returns nanoseconds from `since_ns` to the refusal."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            result = probe.connect_ex(("127.0.0.1", port))
            if result == errno.ECONNREFUSED:
                return time.perf_counter_ns() - since_ns
        finally:
            probe.close()
    raise RuntimeError(f"127.0.0.1:{port} still accepts connections {limit_s}s after background")


def stage_ms(reply):
    return sum(stage["ms"] for stage in reply.get("stages", []))


class Instrumentation:
    """With --callgrind-pid: callgrind counts only inside `measure`, and dumps each transition as a part of its
    own (Benchmarks/profile lifecycle). Without it, does nothing."""

    def __init__(self, pid):
        self.pid = str(pid) if pid else None

    def control(self, *arguments):
        if self.pid:
            subprocess.run(["callgrind_control", *arguments, self.pid], check=True, capture_output=True)

    def request(self, control, label, **members):
        self.control("-i", "on")
        try:
            return control.request(**members)
        finally:
            self.control("-d", label)
            self.control("-i", "off")


def run_lifecycle(args):
    instrument = Instrumentation(args.callgrind_pid)
    control = wait_for_daemon(args.control, seconds=120 if args.callgrind_pid else 20)
    status = app_status(control, args.app)
    ports = listener_ports(status)
    limit = raise_descriptor_limit()
    if args.connections + 64 > limit:
        raise RuntimeError(f"{args.connections} connections need more descriptors than the limit {limit}")

    # The connections, dealt over the listeners in turn (the kernel completes the handshakes; the daemon
    # accepts them meanwhile).
    connections = []
    for i in range(args.connections):
        peer = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        peer.settimeout(10)
        peer.connect(("127.0.0.1", ports[i % len(ports)]))
        connections.append(peer)
    deadline = time.monotonic() + (600 if args.callgrind_pid else 60)
    while True:
        accepted = sum(listener["connections"] for listener in app_status(control, args.app)["listeners"])
        if accepted >= args.connections:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the daemon accepted {accepted} of {args.connections} connections")
        time.sleep(0.05)

    background, foreground, suspend, foreground_from_suspended, refused, background_stages = [], [], [], [], [], []
    for cycle in range(args.cycles):
        # active -> background: the listeners close before the reply, so the first connect is refused.
        reply, elapsed = instrument.request(control, f"background-{cycle}", cmd="background", app=args.app)
        replied = time.perf_counter_ns()
        assert reply["state"] == "background", reply
        refused.append(first_refusal_ns(ports[(cycle * 397) % len(ports)], replied))
        background.append(elapsed)
        background_stages.append(stage_ms(reply))
        time.sleep(args.pause)
        reply, elapsed = instrument.request(control, f"foreground-{cycle}", cmd="foreground", app=args.app)
        assert reply["state"] == "active", reply
        foreground.append(elapsed)
        time.sleep(args.pause)
        # Again, then suspended (every connection stops being read) and back.
        reply, elapsed = instrument.request(control, f"background-again-{cycle}", cmd="background", app=args.app)
        background.append(elapsed)
        background_stages.append(stage_ms(reply))
        time.sleep(args.pause)
        reply, elapsed = instrument.request(control, f"suspend-{cycle}", cmd="suspend", app=args.app)
        assert reply["state"] == "suspended", reply
        suspend.append(elapsed)
        time.sleep(args.pause)
        reply, elapsed = instrument.request(control, f"foreground-from-suspended-{cycle}", cmd="foreground", app=args.app)
        assert reply["state"] == "active", reply
        foreground_from_suspended.append(elapsed)
        time.sleep(args.pause)

    final = app_status(control, args.app)
    kept = sum(listener["connections"] for listener in final["listeners"])
    result = {
        "scenario": "lifecycle",
        "listeners": len(ports),
        "connections": args.connections,
        "connections_kept": kept,
        "background_ms": summary(background, "ms"),
        "background_stages_ms_p50": round(percentile(background_stages, 0.5), 4),
        "foreground_ms": summary(foreground, "ms"),
        "suspend_ms": summary(suspend, "ms"),
        "foreground_from_suspended_ms": summary(foreground_from_suspended, "ms"),
        "refused_after_reply_ms": summary(refused, "ms"),
        "errors": 0 if kept == args.connections else 1,
    }
    for peer in connections:
        peer.close()
    control.close()
    print(json.dumps(result), flush=True)


# MARK: control plane

def run_control(args):
    control = wait_for_daemon(args.control)
    time.sleep(args.wait)
    status_line = encode({"cmd": "status", "app": args.app} if args.app else {"cmd": "status"})
    version_line = encode({"cmd": "version"})
    reply = b""
    for _ in range(50):
        reply, _ = control.round_trip(status_line)
    if not json.loads(reply).get("ok"):
        raise RuntimeError(f"status refused: {reply[:200]!r}")
    apps = len(json.loads(reply)["apps"])
    status, version = [], []
    deadline = time.monotonic() + args.max_seconds
    while len(status) < args.samples and time.monotonic() < deadline:
        _, elapsed = control.round_trip(status_line)
        status.append(elapsed)
        if len(status) % 10 == 0:
            _, elapsed = control.round_trip(version_line)
            version.append(elapsed)
        if args.interval > 0:
            time.sleep(args.interval)
    control.close()
    print(json.dumps({
        "scenario": "control",
        "apps": apps,
        "reply_bytes": len(reply) + 1,
        "status_us": summary(status, "us"),
        "version_us": summary(version, "us"),
    }), flush=True)


# MARK: VoIP wake-up

def run_voip(args):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(30)
    # The port first, on its own line: the caller writes the daemon's config with it.
    print(server.getsockname()[1], flush=True)
    peer, _ = server.accept()
    peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    control = wait_for_daemon(args.control)

    def socket_status():
        reply, _ = control.round_trip(status_line)
        app = json.loads(reply)["apps"][0]
        data_socket = next(s for s in app["sockets"] if s["name"] == args.socket)
        return app["state"], data_socket["lines"], data_socket["state"]

    status_line = encode({"cmd": "status", "app": args.app})
    deadline = time.monotonic() + 10
    while socket_status()[2] != "connected":
        if time.monotonic() > deadline:
            raise RuntimeError("the VoIP socket did not connect")
        time.sleep(0.01)
    control.request(cmd="background", app=args.app)
    reply, _ = control.request(cmd="suspend", app=args.app)
    if reply["state"] != "suspended":
        raise RuntimeError(f"the app did not suspend: {reply}")

    # A watch connection sees the `woken` event as the daemon emits it: a second, one-way measure.
    watch = ControlConnection(args.control)
    watch.round_trip(encode({"cmd": "watch", "app": args.app}))

    def next_event():
        while True:
            end = watch.pending.find(b"\n")
            if end >= 0:
                line, watch.pending = watch.pending[:end], watch.pending[end + 1:]
                return line
            chunk = watch.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("the daemon ended the watch")
            watch.pending += chunk

    def drain_events():
        watch.sock.setblocking(False)
        try:
            while watch.sock.recv(1 << 16):
                pass
        except BlockingIOError:
            pass
        watch.sock.settimeout(10)
        watch.pending = b""

    polled, watched, caught_in_background, polls = [], [], 0, 0
    for sample in range(2 * args.samples):
        # The app suspends itself again right after each wake-up.
        deadline = time.monotonic() + 5
        while True:
            state, lines, _ = socket_status()
            if state == "suspended":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the app stayed {state} after wake-up {sample}")
            time.sleep(0.001)
        time.sleep(args.pause)
        drain_events()
        start = time.perf_counter_ns()
        peer.sendall(b"wake %d\n" % sample)
        if sample % 2 == 1:
            while b'"event":"woken"' not in next_event():
                pass
            watched.append(time.perf_counter_ns() - start)
            continue
        while True:
            state, seen, _ = socket_status()
            polls += 1
            # Woken: `background` now, or already suspended again with the line counted (the wake-up
            # ended between two polls).
            if state == "background" or seen > lines:
                polled.append(time.perf_counter_ns() - start)
                caught_in_background += state == "background"
                break
            if time.perf_counter_ns() - start > 5e9:
                raise RuntimeError(f"wake-up {sample} not seen within 5 s")
    peer.close()
    server.close()
    watch.close()
    control.close()
    print(json.dumps({
        "scenario": "voip",
        "wake_us": summary(polled, "us"),
        "seen_in_background": caught_in_background,
        "polls_per_wake": round(polls / max(1, len(polled)), 2),
        "wake_event_us": summary(watched, "us"),
    }), flush=True)


# MARK: metrics

def turn_buckets(body):
    """The loop's turn histogram in a scrape: {le: cumulative count} (le as text, '+Inf' last)."""
    buckets = {}
    for line in body.splitlines():
        if line.startswith(b"netlife_loop_turn_duration_seconds_bucket{"):
            le = line.split(b'le="', 1)[1].split(b'"', 1)[0].decode()
            buckets[le] = int(float(line.rsplit(b" ", 1)[1]))
    return buckets


SCRAPE_LOG = re.compile(r"scrape of (\d+) app\(s\): (\d+) bytes in (\d+) loop turn\(s\), ([0-9.]+) ms of work, "
                        r"at most ([0-9.]+) ms in one turn")


def run_metrics(args):
    control = wait_for_daemon(args.control)
    status, _ = control.request(cmd="status")
    address = status.get("metrics")
    if not address:
        raise RuntimeError("the daemon serves no metrics (no \"metrics\" in its status)")
    apps = [app["name"] for app in status["apps"]]
    # Every app through a background and foreground cycle: each then has five stages' durations to show.
    for app in apps[: args.cycle_apps]:
        control.request(cmd="background", app=app)
        control.request(cmd="foreground", app=app)
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)

    def scrape():
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"/metrics answered {response.status}")
        return body

    def timed_scrape():
        start = time.perf_counter_ns()
        done = subprocess.run(["curl", "-sS", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                               f"http://{address}/metrics"], capture_output=True, text=True, check=False)
        elapsed = time.perf_counter_ns() - start
        code, _, size = done.stdout.partition(" ")
        if done.returncode != 0 or code != "200":
            raise RuntimeError(f"curl: {done.returncode} {done.stdout} {done.stderr}")
        return int(size), elapsed

    log_offset = 0
    if args.log:
        with open(args.log, "rb") as log:
            log_offset = log.seek(0, 2)
    before = turn_buckets(scrape())

    # `status` of one app every 10 ms while the scrapes run, on a connection of its own.
    probe = ControlConnection(args.control)
    status_line = encode({"cmd": "status", "app": apps[0]})
    probe_times = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            _, elapsed = probe.round_trip(status_line)
            probe_times.append(elapsed)
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    times, sizes = [], []
    try:
        for _ in range(args.scrapes):
            size, elapsed = timed_scrape()
            times.append(elapsed)
            sizes.append(size)
    finally:
        stop.set()
        sampler.join()
    after = turn_buckets(scrape())

    turns = after.get("+Inf", 0) - before.get("+Inf", 0)
    within = after.get("0.005", 0) - before.get("0.005", 0)
    longest = None
    previous = 0
    for le, count in after.items():
        if count - before.get(le, 0) > previous:
            longest = le
        previous = max(previous, count - before.get(le, 0))
    work, longest_turn, turns_per_scrape = [], [], []
    if args.log:
        with open(args.log, "rb") as log:
            log.seek(log_offset)
            for line in log.read().decode(errors="replace").splitlines():
                found = SCRAPE_LOG.search(line)
                if found and int(found.group(1)) == len(apps):
                    work.append(float(found.group(4)) * 1e6)
                    longest_turn.append(float(found.group(5)) * 1e6)
                    turns_per_scrape.append(int(found.group(3)))
    connection.close()
    probe.close()
    control.close()
    print(json.dumps({
        "scenario": "metrics",
        "apps": len(apps),
        "scrape_bytes": sizes[0] if sizes else 0,
        "scrape_ms": summary(times, "ms"),
        "work_ms": summary(work, "ms") if work else None,
        "longest_turn_ms": summary(longest_turn, "ms") if longest_turn else None,
        "turns_per_scrape": percentile(turns_per_scrape, 0.5),
        "loop_turns": turns,
        "loop_turns_over_5ms": turns - within,
        "loop_longest_turn_bucket_s": longest,
        "status_us": summary(probe_times, "us"),
        "errors": 0,
    }), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    lifecycle = commands.add_parser("lifecycle", help="background/foreground with many listeners and connections")
    lifecycle.add_argument("--control", required=True)
    lifecycle.add_argument("--app", default="bench")
    lifecycle.add_argument("--connections", type=int, default=10000)
    lifecycle.add_argument("--cycles", type=int, default=10)
    lifecycle.add_argument("--pause", type=float, default=0.05, help="seconds between transitions")
    lifecycle.add_argument("--callgrind-pid", type=int, help="count instructions of this callgrind process per transition")
    control = commands.add_parser("control", help="status round trips")
    control.add_argument("--control", required=True)
    control.add_argument("--app", default=None, help="ask for one app (default: all)")
    control.add_argument("--samples", type=int, default=2000)
    control.add_argument("--wait", type=float, default=0.0, help="seconds to wait before sampling")
    control.add_argument("--max-seconds", type=float, default=10.0)
    control.add_argument("--interval", type=float, default=0.0, help="seconds between two status requests (0: back to back)")
    voip = commands.add_parser("voip", help="VoIP wake-up latency")
    voip.add_argument("--control", required=True)
    voip.add_argument("--app", default="bench")
    voip.add_argument("--socket", default="v")
    voip.add_argument("--samples", type=int, default=100)
    voip.add_argument("--pause", type=float, default=0.005, help="seconds suspended before each wake-up")
    metrics = commands.add_parser("metrics", help="/metrics scrapes of many apps")
    metrics.add_argument("--control", required=True)
    metrics.add_argument("--scrapes", type=int, default=20)
    metrics.add_argument("--cycle-apps", type=int, default=1000, help="apps sent through background and foreground first")
    metrics.add_argument("--log", help="the daemon's log (at debug level): its account of each scrape")
    args = parser.parse_args()
    try:
        {"lifecycle": run_lifecycle, "control": run_control, "voip": run_voip, "metrics": run_metrics}[args.command](args)
    except (OSError, RuntimeError, AssertionError) as error:
        print(f"controlbench: {args.command}: {error!r}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
