#if canImport(Testing)
// A small program that speaks systemd's notify protocol on the NOTIFY_SOCKET netlifed gives it, for the tests
// of process apps' readiness and watchdog: it says STATUS=starting, READY=1 after NOTIFY_READY_AFTER seconds
// (never when unset), WATCHDOG=1 every NOTIFY_PING_INTERVAL seconds while WATCHDOG_USEC is set (only the first
// NOTIFY_PINGS of them when that is set), RELOADING=1 then READY=1 on SIGHUP, WATCHDOG=trigger from a forked
// child on SIGUSR1, and STOPPING=1 on SIGTERM. Its
// first line of output shows what it was given.

/// The program's Python source.
public let notifyProgramSource = #"""
import os, signal, socket, sys, time
address = os.environ.get("NOTIFY_SOCKET", "")
print("notify-program: NOTIFY_SOCKET=%s WATCHDOG_USEC=%s own-WATCHDOG_PID=%s" % (
    address, os.environ.get("WATCHDOG_USEC", "unset"), os.environ.get("WATCHDOG_PID") == str(os.getpid())), flush=True)
target = "\0" + address[1:] if address.startswith("@") else address
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def send(text):
    sock.sendto(text.encode(), target)
def on_term(*_):
    send("STOPPING=1")
    sys.exit(0)
def on_hup(*_):
    send("RELOADING=1\nSTATUS=reloading")
    send("READY=1\nSTATUS=reloaded")
signal.signal(signal.SIGTERM, on_term)
def on_usr1(*_):
    if os.fork() == 0:
        send("WATCHDOG=trigger")
        os._exit(0)
signal.signal(signal.SIGHUP, on_hup)
signal.signal(signal.SIGUSR1, on_usr1)
send("STATUS=starting")
ready_after = os.environ.get("NOTIFY_READY_AFTER")
if ready_after is not None:
    time.sleep(float(ready_after))
    send("READY=1\nSTATUS=serving\x1b[0m\t1 client")
pings = int(os.environ.get("NOTIFY_PINGS", "-1"))
interval = float(os.environ.get("NOTIFY_PING_INTERVAL", "0.1"))
sent = 0
while True:
    time.sleep(interval)
    if os.environ.get("WATCHDOG_USEC") and (pings < 0 or sent < pings):
        send("WATCHDOG=1")
        sent += 1
"""#

/// An `[app NAME]` running the notify program at `script` with `environment` (NOTIFY_* knobs), not launched
/// at start (`launch = no`), with `appLines` added.
public func notifyProgramApp(_ name: String, script: String, environment: [String: String] = [:], appLines: String = "") -> String {
    let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    return """
        [app \(name)]
        exec = \(systemPython) \(script)
        launch = no
        \(variables.isEmpty ? "" : "environment = \(variables)")
        \(appLines)

        """
}

/// Sends one datagram to a NOTIFY_SOCKET address (`@` for an abstract name) from a process of its own, outside
/// any app's cgroup. Returns whether it was sent.
public func sendNotify(to address: String, _ message: String) -> Bool {
    let code = "import socket, sys; a = sys.argv[1]; s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
        + "s.sendto(sys.argv[2].encode(), '\\0' + a[1:] if a.startswith('@') else a)"
    return run([systemPython, "-c", code, address, message], timeout: 10).status == 0
}
#endif
