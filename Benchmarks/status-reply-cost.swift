// The cost of one `status` reply, run by hand (not part of the package or of any test run): builds a
// StatusReply of 10 apps, each with 2 listeners, 3 data sockets, 2 tasks, a last termination and 3 stages,
// then times encoding it to a line (`json.serialized`) and decoding that line (`JSON.parse` then
// `StatusReply(json:)`). Prints the median of 15 rounds of 2,000 each (or of
// ROUNDS of COUNT given as arguments), in microseconds per reply.
//
//   b=.build/status-reply-cost; swift build -c release --target NetLifeControl --scratch-path $b &&
//   swiftc -O -parse-as-library Benchmarks/status-reply-cost.swift -I $b/release/Modules \
//       $b/release/NetLife{JSON,Status,Control}.build/*.o -o $b/run && $b/run
// (the modules as netlifectl links them: compiled on their own, called across module boundaries).

@preconcurrency import Glibc
import NetLifeControl

@main
enum StatusReplyCost {
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func sample() -> StatusReply {
        let apps = (0..<10).map { index in
            let figures = DataProtocolStatus([DataProtocolDetail("exists", .count(120)), DataProtocolDetail("existsUpdates", .count(4)),
                                              DataProtocolDetail("expunges", .count(1)), DataProtocolDetail("idle", .flag(true))])
            return AppStatus(name: "app\(index)", state: .background, backgroundTimeRemaining: 171.25,
                             listeners: (0..<2).map { ListenerStatus(name: "l\($0)", address: "127.0.0.1:\(8000 + $0)", service: "echo",
                                                                    open: $0 == 0, error: $0 == 0 ? nil : "closed in background",
                                                                    connections: 3) },
                             sockets: (0..<3).map { number in
                                 DataSocketStatus(name: "s\(number)", peer: "imap.example.org:993", policy: .close, voip: number == 0,
                                                  state: .connected, error: nil, protocolName: "imap", connects: 2, protocolStatus: figures)
                             },
                             tasks: (0..<2).map { TaskStatus(id: UInt64($0 + 1), name: "sync \($0)", age: 1.5) },
                             lastTermination: TerminationStatus(reason: .watchdog, at: 1_790_000_000.123, stage: "did-enter-background",
                                                                budget: 5, elapsed: 5.2),
                             lastStages: [LifecycleEvent.willResignActive, .didEnterBackground].map {
                                 StageTiming(event: $0, milliseconds: 0.25)
                             },
                             program: ProgramStatus(pid: 4242, cgroup: "/sys/fs/cgroup/netlife/app\(index)", containment: .cgroupV2,
                                                    frozen: false, memoryBytes: 1 << 20, speaksProtocol: true, members: 1))
        }
        return StatusReply(apps: apps, degradedReasons: ["listener x: address in use"])
    }

    static func median(_ rounds: Int, _ count: Int, _ body: () -> Int) -> Double {
        var times: [Double] = []
        var sink = 0
        for _ in 0..<rounds {
            let start = now()
            for _ in 0..<count { sink &+= body() }
            times.append((now() - start) / Double(count) * 1e6)
        }
        if sink == 42 { print("") }
        return times.sorted()[rounds / 2]
    }

    static func main() throws {
        let reply = sample()
        let line = reply.json.serialized
        guard try StatusReply(json: JSON.parse(line)) == reply else { fatalError("the reply does not round-trip") }
        // `status-reply-cost ROUNDS COUNT`: fewer for a run under valgrind.
        let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
        let rounds = arguments.first ?? 15, count = arguments.dropFirst().first ?? 2000
        let encode = median(rounds, count) { reply.json.serialized.utf8.count }
        let decode = median(rounds, count) { (try? StatusReply(json: JSON.parse(line)))?.apps.count ?? 0 }
        print("status reply of \(line.utf8.count) bytes: encode \((encode * 10).rounded() / 10) us, decode \((decode * 10).rounded() / 10) us")
    }
}
