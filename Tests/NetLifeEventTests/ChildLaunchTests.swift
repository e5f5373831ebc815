// Children started as process apps are: listeners at descriptors 3 and 4 under systemd's socket-activation
// protocol (LISTEN_FDS, LISTEN_PID equal to the program's own pid, LISTEN_FDNAMES), accepting on them; a
// working directory; the exec script's text; a program run as another user through setpriv, and refused
// rather than run as root when setpriv is missing; programs found as execvp finds them; and options that
// cannot work refused before anything runs.

import Foundation
@testable import NetLifeEvent
import Testing
import NetLifeTestSupport

@Suite(.timeLimit(.minutes(2)))
struct ChildLaunchTests {
    static let activatedScript = """
        import os, socket, select
        print("fds", os.environ.get("LISTEN_FDS"), flush=True)
        print("pid", os.environ.get("LISTEN_PID") == str(os.getpid()), flush=True)
        print("names", os.environ.get("LISTEN_FDNAMES"), flush=True)
        print("cwd", os.getcwd(), flush=True)
        a = socket.socket(fileno=3)
        b = socket.socket(fileno=4)
        print("ports", a.getsockname()[1], b.getsockname()[1], flush=True)
        select.select([a], [], [], 10)
        c, _ = a.accept()
        c.sendall(b"hello\\n")
        c.close()
        print("accepted", flush=True)
        """

    @Test func aChildGetsItsListenersUnderSocketActivationAndAcceptsOnThem() throws {
        let loop = try EventLoop()
        let (first, firstAddress) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 8)
        let (second, secondAddress) = try SocketCalls.listen(on: .ipv4("127.0.0.1", port: 0), backlog: 8)
        defer { close(first); close(second) }
        var lines: [String] = []
        var status: ChildExitStatus?
        // The second listener is passed first to 3: the descriptors are placed in the order given, whatever
        // their numbers in the daemon.
        _ = try ChildProcess(loop: loop, arguments: ["python3", "-c", Self.activatedScript],
                             environment: ["PATH": "/usr/bin:/bin", "LISTEN_PID": "1", "LISTEN_FDS": "9"],
                             options: ChildLaunchOptions(descriptors: [second, first], listenerNames: ["a", "b"], workingDirectory: "/tmp"),
                             onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        #expect(runLoop(loop) { lines.contains { $0.hasPrefix("ports") } || status != nil })
        #expect(lines.prefix(4) == ["fds 2", "pid True", "names a:b", "cwd /tmp"])
        #expect(lines.last == "ports \(try #require(secondAddress.port)) \(try #require(firstAddress.port))")
        #expect(tcpConnect(port: try #require(secondAddress.port)) == 0)
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(0) && lines.last == "accepted")
        for fd in [first, second] { #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0, "the daemon's own copies stay close-on-exec") }
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func descriptorsAfterTheListenersArePassedUnannouncedAndWithoutActivationNothingIsSet() throws {
        let loop = try EventLoop()
        var pipeFDs: [CInt] = [-1, -1]
        #expect(pipe(&pipeFDs) == 0)
        defer { close(pipeFDs[0]); close(pipeFDs[1]) }
        var lines: [String] = []
        var status: ChildExitStatus?
        _ = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "echo \"${LISTEN_FDS-unset} ${LISTEN_PID-unset}\"; echo passed >&3"],
                             environment: [:], options: ChildLaunchOptions(descriptors: [pipeFDs[1]]),
                             onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(0) && lines == ["unset unset"])
        #expect(String(decoding: readAvailable(pipeFDs[0]), as: UTF8.self) == "passed\n")
    }

    @Test func aChildInheritsNothingButItsDescriptorsEvenWhatIsNotCloseOnExec() throws {
        let loop = try EventLoop()
        let devNull = open("/dev/null", O_RDONLY)
        let leaked = fcntl(devNull, F_DUPFD, 200)   // deliberately without close-on-exec
        close(devNull)
        defer { close(leaked) }
        var passed: [CInt] = [-1, -1]
        #expect(pipe(&passed) == 0)
        defer { close(passed[0]); close(passed[1]) }
        var lines: [String] = []
        var status: ChildExitStatus?
        _ = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "cd /proc/$$/fd && echo *"], environment: [:],
                             options: ChildLaunchOptions(descriptors: [passed[1]]),
                             onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        // The glob reads the directory through a descriptor of its own, the lowest free one (4).
        #expect(lines == ["0 1 2 3 4"], "descriptor \(leaked) stays with the daemon")
    }

    @Test func theExecScriptHoldsNoDataAndFailedStepsExitWithSystemdsCodes() throws {
        let options = ChildLaunchOptions(descriptors: [7], listenerNames: ["web"], workingDirectory: "/srv/$(rm -rf /)",
                                         joinCgroups: ["/sys/fs/cgroup/x y"])
        #expect(options.spawnArguments(["prog", "--flag"]) == [
            "/bin/sh", "-c", "cd -- \"$1\" || exit 200; echo $$ > \"$2\" || exit 219; shift 2; LISTEN_PID=$$; export LISTEN_PID; exec \"$@\"",
            "netlife-exec", "/srv/$(rm -rf /)", "/sys/fs/cgroup/x y/cgroup.procs", "prog", "--flag"])
        #expect(ChildLaunchOptions().spawnArguments(["prog"]) == ["prog"])
        #expect(ChildLaunchOptions(descriptors: [3]).spawnArguments(["prog"]) == ["prog"], "descriptors alone need no script")

        let loop = try EventLoop()
        var statuses: [ChildExitStatus] = []
        for options in [ChildLaunchOptions(workingDirectory: "/nonexistent/dir"),
                        ChildLaunchOptions(joinCgroups: ["/nonexistent/cgroup"])] {
            _ = try ChildProcess(loop: loop, arguments: ["true"], environment: ["PATH": "/usr/bin:/bin"], options: options,
                                 onOutput: { _ in }, onExit: { statuses.append($0) })
        }
        var missing: ChildExitStatus?
        _ = try ChildProcess(loop: loop, arguments: ["/nonexistent/program"], environment: [:], options: ChildLaunchOptions(listenerNames: []),
                             onOutput: { _ in }, onExit: { missing = $0 })
        #expect(runLoop(loop) { statuses.count == 2 && missing != nil })
        #expect(Set(statuses.map(\.description)) == ["exit status 200", "exit status 219"])
        #expect(missing == .exited(127), "through the script a missing program is exit 127, as in a shell")
    }

    @Test func theUsersIdsArePositionalParametersNeverScriptText() throws {
        let user = ChildUser(uid: 4711, gid: 4712)
        let arguments = ChildLaunchOptions(workingDirectory: "/srv", joinCgroups: ["/sys/fs/cgroup/a"], user: user).spawnArguments(["prog", "-x"])
        #expect(arguments == [
            "/bin/sh", "-c", "cd -- \"$1\" || exit 200; echo $$ > \"$2\" || exit 219; netlife_uid=$3; netlife_gid=$4; shift 4; "
                + "command -v setpriv > /dev/null || { echo \"netlife-exec: setpriv (util-linux) is not in PATH: cannot run the program as uid "
                + "$netlife_uid\" >&2; exit 217; }; exec setpriv --reuid=\"$netlife_uid\" --regid=\"$netlife_gid\" --init-groups -- \"$@\"",
            "netlife-exec", "/srv", "/sys/fs/cgroup/a/cgroup.procs", "4711", "4712", "prog", "-x"])
        #expect(ChildLaunchOptions(user: user).spawnArguments(["prog"]).count == 7, "a user alone needs the script")
        #expect(ChildLaunchOptions(user: ChildUser(uid: UInt32.max, gid: 1)).problem != nil, "uid -1 would leave root in place")
        #expect(ChildLaunchOptions(user: ChildUser(uid: 1, gid: UInt32.max)).problem != nil)
    }

    @Test(.enabled(if: geteuid() == 0, "changing the user needs root"))
    func aChildGivenAUserRunsWithItsUidGidAndGroups() throws {
        let nobody = try #require(account(named: "nobody"))
        let options = ChildLaunchOptions(workingDirectory: "/", user: ChildUser(uid: nobody.uid, gid: nobody.gid))
        let script = options.spawnArguments(["id"])[2]
        #expect(!script.contains(String(nobody.uid)) && !script.contains(String(nobody.gid)), "\(script)")

        let loop = try EventLoop()
        var lines: [String] = []
        var status: ChildExitStatus?
        _ = try ChildProcess(loop: loop, arguments: ["/bin/sh", "-c", "echo \"$(id -u) $(id -g) $$\"; id -G"],
                             environment: ["PATH": "/usr/bin:/bin"], options: options,
                             onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(0))
        let ids = lines.first?.split(separator: " ").map(String.init) ?? []
        #expect(ids.prefix(2) == ["\(nobody.uid)", "\(nobody.gid)"], "\(lines)")
        #expect(lines.count == 2 && !(lines.last ?? "0").split(separator: " ").contains("0"), "root's groups are dropped: \(lines)")

        // Without setpriv the program does not run at all, rather than as root.
        lines = []
        status = nil
        _ = try ChildProcess(loop: loop, arguments: ["/usr/bin/id", "-u"], environment: ["PATH": "/nonexistent"], options: options,
                             onOutput: { if case .line(let line) = $0 { lines.append(line) } }, onExit: { status = $0 })
        #expect(runLoop(loop) { status != nil })
        #expect(status == .exited(ChildLaunchOptions.userExitStatus))
        #expect(lines == ["netlife-exec: setpriv (util-linux) is not in PATH: cannot run the program as uid \(nobody.uid)"])
        #expect(loop.registeredObjectCount == 0)
    }

    @Test func programsAreFoundAsExecvpFindsThem() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locate-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(FileManager.default.createFile(atPath: directory + "/plain", contents: Data("#!/bin/sh\n".utf8),
                                               attributes: [.posixPermissions: 0o644]))
        #expect(FileManager.default.createFile(atPath: directory + "/tool", contents: Data("#!/bin/sh\n".utf8),
                                               attributes: [.posixPermissions: 0o755]))
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: false)

        #expect(try ChildProcess.locateProgram("sh", searchPath: "/nonexistent:/bin") == "/bin/sh")
        #expect(try ChildProcess.locateProgram("tool", searchPath: "\(directory)/plain:\(directory)") == "\(directory)/tool")
        #expect(try ChildProcess.locateProgram("./tool", searchPath: nil, directory: directory) == "./tool", "relative to where the child starts")
        #expect(try ChildProcess.locateProgram("tool", searchPath: ":/bin", directory: directory) == "tool", "an empty entry is that directory")
        func error(_ program: String, _ searchPath: String?, _ directory: String? = nil) -> SystemError? {
            do { _ = try ChildProcess.locateProgram(program, searchPath: searchPath, directory: directory); return nil } catch { return error }
        }
        #expect(error("no-such-program", "/bin:/usr/bin") == SystemError("execvp(no-such-program)", Errno(rawValue: ENOENT)))
        #expect(error("/nonexistent/program", nil)?.errno == Errno(rawValue: ENOENT))
        #expect(error("", "/bin")?.errno == Errno(rawValue: ENOENT))
        #expect(error(directory + "/plain", nil) == SystemError("execvp(\(directory)/plain)", Errno(rawValue: EACCES)), "not executable")
        #expect(error("plain", directory)?.errno == Errno(rawValue: EACCES), "found but not executable is EACCES, as execvp says")
        #expect(error("sub", directory)?.errno == Errno(rawValue: EACCES), "a directory")
        #expect(error("./plain", nil, directory)?.errno == Errno(rawValue: EACCES))
    }

    @Test func optionsThatCannotWorkAreRefused() throws {
        #expect(ChildLaunchOptions(descriptors: [3], listenerNames: ["a", "b"]).problem != nil)
        #expect(ChildLaunchOptions(descriptors: [3], listenerNames: ["a:b"]).problem != nil)
        #expect(ChildLaunchOptions(descriptors: [3], listenerNames: [""]).problem != nil)
        #expect(ChildLaunchOptions(descriptors: [3], listenerNames: ["a\n"]).problem != nil)
        #expect(ChildLaunchOptions(descriptors: [3], listenerNames: [String(repeating: "n", count: 256)]).problem != nil)
        #expect(ChildLaunchOptions(descriptors: [-1]).problem != nil)
        #expect(ChildLaunchOptions(descriptors: Array(repeating: 3, count: 1025)).problem != nil)
        #expect(ChildLaunchOptions(descriptors: [3, 4], listenerNames: ["a"]).problem == nil)
        let loop = try EventLoop()
        #expect(throws: SystemError.self) {
            _ = try ChildProcess(loop: loop, arguments: ["true"], environment: [:], options: ChildLaunchOptions(descriptors: [3], listenerNames: ["a:b"]),
                                 onOutput: { _ in }, onExit: { _ in })
        }
        #expect(loop.registeredObjectCount == 0)
    }
}

