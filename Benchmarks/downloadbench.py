#!/usr/bin/env python3
"""The client half of the https-download scenario: downloads one URL COUNT times, either with netlifed
(`netlifectl download APP URL --output FILE --cacert CA`, waiting) or with the curl command line (`curl
--cacert CA -o FILE URL`), each into a file that is checked for its size and removed, and prints one JSON line.

  netlifed  the daemon's CPU (utime + stime of --daemon-pid from /proc/PID/stat, before and after each
            download), netlifectl's own (its rusage), and, unless --interval is 0, `status` round trips on the
            control socket while the download runs, one every --interval seconds, each timed from the first
            byte sent to the reply's newline (the sampler is this script: its CPU competes with both ends of
            the transfer, so Benchmarks/run times the rate without it and samples `status` in a run of its own)
  curl      curl's CPU from its rusage (wait4)
  curl-fsync  the same, and the file fsynced after curl exits, inside the timed span: a download that ends on
            the disk, as netlifed's does (curl never syncs; its file stays in the page cache)

Both report MB/s (10^6 bytes of body per second, all downloads together, timed from the client's start to its
exit), CPU seconds per GiB, the server's CPU seconds per GiB (/proc/PID/stat of every --server-pid: nginx's
master and worker), and the protocol nginx logged for the requests made during the run (--access-log).
A download that fails ends the run at once with exit status 1 and the client's own words on stderr; every
wait is bounded (--timeout per download). Only the standard library is used.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

GIB = float(1 << 30)


def process_cpu_seconds(pid):
    """utime + stime of a live process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After the command: state is field 0, utime 11, stime 12 (clock ticks).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(q * len(ordered) + 0.999999)))
    return ordered[rank - 1]


def summary_us(nanoseconds):
    values = [v / 1e3 for v in nanoseconds]
    if not values:
        return {"p50": None, "p99": None, "max": None, "samples": 0, "values": []}
    return {"p50": round(percentile(values, 0.5), 1), "p99": round(percentile(values, 0.99), 1),
            "max": round(max(values), 1), "samples": len(values), "values": [round(v, 1) for v in values]}


class StatusSampler:
    """`status` round trips on one control connection, one every `interval` seconds."""

    def __init__(self, path, interval):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.interval = interval
        self.next = 0.0
        self.samples = []
        self.pending = b""

    def maybe_sample(self):
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + self.interval
        start = time.perf_counter_ns()
        self.sock.sendall(b'{"cmd":"status"}\n')
        while b"\n" not in self.pending:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("netlifed closed the control connection")
            self.pending += chunk
        self.samples.append(time.perf_counter_ns() - start)
        reply, self.pending = self.pending.split(b"\n", 1)
        if not json.loads(reply).get("ok"):
            raise RuntimeError(f"status refused: {reply[:200]!r}")

    def close(self):
        self.sock.close()


def run_one(command, expect, output, timeout, sampler=None, sync=False):
    """Runs one download; returns (seconds, the client's CPU seconds). Fails the run on any error. With
    `sync`, the output is fsynced after the client exits, and that is timed too."""
    started = time.monotonic()
    # Output to files, not pipes: a pipe nobody reads while the child runs could fill and stop it.
    out_file, err_file = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out_file, stderr=err_file)
    deadline = started + timeout
    status = usage = None
    while status is None:
        pid, status_word, usage_now = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            status, usage = os.waitstatus_to_exitcode(status_word), usage_now
            break
        if time.monotonic() > deadline:
            child.send_signal(signal.SIGKILL)
            child.wait()
            fail(f"{command[0]} did not finish within {timeout} s")
        if sampler:
            sampler.maybe_sample()
        time.sleep(0.002)
    if sync and status == 0 and os.path.exists(output):
        fd = os.open(output, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    elapsed = time.monotonic() - started
    child.returncode = status
    out_file.seek(0)
    err_file.seek(0)
    out, err = out_file.read().decode(errors="replace"), err_file.read().decode(errors="replace")
    if status != 0:
        # On one line: the caller reports the last line of what this prints.
        words = " ".join((err or out).split())
        fail(f"{os.path.basename(command[0])} exited with {status}: {words[:500]}")
    size = os.path.getsize(output) if os.path.exists(output) else -1
    if size != expect:
        fail(f"{os.path.basename(command[0])} wrote {size} bytes to {output}, expected {expect}: {out.strip()[:300]}")
    os.remove(output)
    return elapsed, usage.ru_utime + usage.ru_stime


def fail(message):
    print(f"downloadbench: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def protocols_since(path, offset):
    """The protocols ($server_protocol, logged as proto=...) of the requests appended to nginx's log."""
    if not path:
        return []
    with open(path) as log:
        log.seek(offset)
        return sorted({word[6:] for line in log for word in line.split() if word.startswith("proto=")})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("client", choices=["netlifed", "curl", "curl-fsync"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--cacert", required=True)
    parser.add_argument("--output", required=True, help="the file each download writes (removed after each)")
    parser.add_argument("--expect", type=int, required=True, help="the file's size in bytes")
    parser.add_argument("--count", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per download")
    parser.add_argument("--server-pid", type=int, action="append", default=[])
    parser.add_argument("--access-log", help="nginx's access log, with proto=$server_protocol in each line")
    parser.add_argument("--curl", default="curl")
    parser.add_argument("--netlifectl", help="netlifectl (client netlifed)")
    parser.add_argument("--control", help="netlifed's control socket (client netlifed)")
    parser.add_argument("--daemon-pid", type=int, help="netlifed's pid (client netlifed)")
    parser.add_argument("--app", default="bench")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between status round trips (0: none)")
    args = parser.parse_args()
    if args.client == "netlifed" and not (args.netlifectl and args.control and args.daemon_pid):
        parser.error("netlifed needs --netlifectl, --control and --daemon-pid")

    log_offset = os.path.getsize(args.access_log) if args.access_log and os.path.exists(args.access_log) else 0
    server_before = sum(process_cpu_seconds(pid) for pid in args.server_pid)
    sampler = StatusSampler(args.control, args.interval) if args.client == "netlifed" and args.interval > 0 else None
    daemon = args.client == "netlifed"
    times, client_cpu, daemon_cpu = [], 0.0, 0.0
    for _ in range(args.count):
        if args.client in ("curl", "curl-fsync"):
            command = [args.curl, "--silent", "--show-error", "--cacert", args.cacert, "--output", args.output, args.url]
        else:
            command = [args.netlifectl, "--control", args.control, "download", args.app, args.url,
                       "--output", args.output, "--cacert", args.cacert]
        before = process_cpu_seconds(args.daemon_pid) if daemon else 0.0
        elapsed, cpu = run_one(command, args.expect, args.output, args.timeout, sampler, sync=args.client == "curl-fsync")
        if daemon:
            daemon_cpu += process_cpu_seconds(args.daemon_pid) - before
        times.append(elapsed)
        client_cpu += cpu
    server_cpu = sum(process_cpu_seconds(pid) for pid in args.server_pid) - server_before
    gib = args.expect * args.count / GIB
    result = {
        "scenario": "https-download",
        "client": args.client,
        "downloads": args.count,
        "bytes": args.expect * args.count,
        "elapsed_s": round(sum(times), 3),
        "mb_per_s": round(args.expect * args.count / sum(times) / 1e6, 1),
        "best_mb_per_s": round(args.expect / min(times) / 1e6, 1),
        "server_cpu_s_per_gib": round(server_cpu / gib, 3),
        "protocols": protocols_since(args.access_log, log_offset),
    }
    if daemon:
        result["client_cpu_s_per_gib"] = round(daemon_cpu / gib, 3)  # netlifed's: it is the client here
        result["netlifectl_cpu_s_per_gib"] = round(client_cpu / gib, 3)
    else:
        result["client_cpu_s_per_gib"] = round(client_cpu / gib, 3)
    if sampler:
        sampler.close()
        result["status_us"] = summary_us(sampler.samples)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
