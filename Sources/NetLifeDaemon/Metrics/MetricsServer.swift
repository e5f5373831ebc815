// The `/metrics` endpoint (`[daemon] metrics = ADDRESS`): the daemon's own HTTP listener on the loop, with the
// http service's request parser and the connections every app uses (docs/metrics.md says why not libevent's
// evhttp). It keeps the registry (the counts, fed by the runtime) and serves scrapes. A scrape is spread over
// loop turns: each turn gives all scrapes together at most `workPerTurn`, spent reading the apps (a few at a
// time: a process app's memory is a file of its cgroup) and then writing the text family by family, each
// slice sent at once as a chunk; while a client leaves more than `highWaterMark` unread, its scrape waits.
// Bounds: `maxConnections` at once (the next gets 503), a request head within `requestTimeout` of connecting
// or of beginning it (408), `idleTimeout` between requests, and a client that takes no byte of its answer
// for `writeTimeout` is reset.

import NetLife
import NetLifeControl
import NetLifeEvent
import NetLifeServices

/// The metrics endpoint and its counts.
final class MetricsServer {
    /// The endpoint's bounds.
    struct Limits {
        /// Connections served at once.
        var maxConnections = 16
        /// From connecting, or from the first byte of a request after an idle wait, to its complete head.
        var requestTimeout = Duration.seconds(10)
        /// Between two requests on a kept connection (longer than Prometheus' default scrape interval, 1 min).
        var idleTimeout = Duration.seconds(120)
        /// How long a client may leave its answer unread beyond the high-water mark before it is reset.
        var writeTimeout = Duration.seconds(10)
        /// Unread answer bytes past which a scrape waits for its client.
        var highWaterMark = 256 * 1024
        /// The time the scrapes may take together in one loop turn (at least one step is taken).
        var workPerTurn = Duration.microseconds(1000)
    }

    /// Apps read in one step (between two looks at the clock).
    static let appsPerStep = 8
    /// The text one step writes, and the most units it writes (`MetricsScrape.render`): about 16 KiB, sent as
    /// one chunk. A unit is one app's samples of one family (a histogram family's are the heaviest, about 1 KiB
    /// a stage); 16 KiB take some tens of microseconds.
    static let chunkBytes = 16 * 1024
    static let unitsPerStep = 256

    /// The bounds (unit tests shorten them).
    var limits = Limits()

    /// The address it listens on, with the port the kernel chose for port 0.
    var address: SocketAddress { listener?.address ?? configured }
    private(set) var registry = MetricsRegistry()
    /// The apps a scrape shows, in the config's order (the runtime's supervisor's).
    var apps: () -> [App] = { [] }
    /// The bytes each app's transfers have moved, by direction (MetricVocabulary.directions' order).
    var transferBytes: () -> [String: [UInt64]] = { [:] }

    private let configured: SocketAddress
    private unowned let loop: EventLoop
    let logger: Logger
    private var listener: Listener?
    private var sessions: [ObjectIdentifier: MetricsSession] = [:]
    /// The sessions whose scrape has work, in the order they asked; served round-robin.
    private var working: [MetricsSession] = []
    private var pump: EventTimer?
    /// The loop turns scrapes have worked in so far (a scrape counts its own turns by it).
    private(set) var turnsWorked = 0
    /// /proc/stat's boot time, read once.
    private let bootTime = ProcessStats.bootTime()

    init(address: SocketAddress, loop: EventLoop, logger: Logger) {
        configured = address
        self.loop = loop
        self.logger = logger.labeled("metrics")
    }

    /// Binds and listens. The corresponding C functions are `bind` and `listen`.
    func start() throws(SystemError) {
        listener = try Listener(loop: loop, address: configured, backlog: 64,
                                onAccept: { [weak self] socket in
                                    guard let self else { return SocketCalls.close(socket.fd) }
                                    accepted(socket)
                                },
                                onError: { [weak self] error in
                                    guard let self else { return }
                                    logger.warning("\(error) on the metrics listener; pausing accept for 250ms")
                                    listener?.pause()
                                    loop.schedule(after: .milliseconds(250)) { [weak self] in self?.listener?.resume() }
                                })
        pump = EventTimer(loop: loop) { [weak self] in self?.work() }
        loop.measuresTurnTimes = true
        logger.info("serving \(MetricsAnswer.path) on http://\(address)\(MetricsAnswer.path)")
    }

    /// Closes the listener and every connection.
    func close() {
        listener?.close()
        listener = nil
        pump?.close()
        pump = nil
        working = []
        for session in Array(sessions.values) { session.close() }
        sessions = [:]
    }

    // MARK: Counting

    /// What an app's event adds to the counts.
    func record(_ event: AppEvent, app: String) {
        registry.record(event, app: app)
    }

    /// A control request answered.
    func recordControlRequest(_ request: JSON?, reply: JSON) {
        registry.recordControlRequest(request, reply: reply)
    }

    // MARK: Connections

    private func accepted(_ socket: AcceptedSocket) {
        serve(fd: socket.fd)
    }

    /// Serves a connected socket (an accepted one; a unit test's end of a socket pair).
    func serve(fd: CInt) {
        let connection: Connection
        do {
            connection = try Connection(loop: loop, fd: fd)
        } catch {
            logger.warning("dropped a metrics connection: \(error)")
            return
        }
        guard sessions.count < limits.maxConnections else {
            connection.output.append(MetricsAnswer.tooManyConnections(limits.maxConnections).bytes)
            connection.close(.afterFlush)
            return
        }
        connection.outputHighWaterMark = limits.highWaterMark
        let session = MetricsSession(connection: connection, server: self, loop: loop)
        sessions[ObjectIdentifier(session)] = session
    }

    func sessionClosed(_ session: MetricsSession) {
        sessions[ObjectIdentifier(session)] = nil
        working.removeAll { $0 === session }
    }

    // MARK: Scrapes

    /// A new scrape: the counts as they are now, the apps to read, the loop's turns and the process.
    func makeScrape() -> (MetricsScrape, [App]) {
        let apps = self.apps()
        registry.keepApps(Set(apps.map(\.name)))
        let turns = loop.turnTimes
        let loopTurns = Histogram(bounds: LoopTurnTimes.boundNanoseconds.map { Double($0) / 1e9 }, bucketCounts: turns.bucketCounts,
                                  sum: Double(turns.sumNanoseconds) / 1e9, count: turns.count)
        let scrape = MetricsScrape(apps: [], controlRequests: registry.orderedControlRequests, loopTurns: loopTurns,
                                   process: ProcessStats.current(bootTime: bootTime), version: ControlProtocol.daemonVersion)
        return (scrape, apps)
    }

    /// What a scrape shows of `app` now.
    func sample(_ app: App, transferBytes: [String: [UInt64]]) -> AppSample {
        let use = app.use
        return AppSample(name: app.name, state: app.state, memoryBytes: app.heldBytes, connections: use.openConnections,
                         acceptedConnections: use.accepted, backgroundTimeRemaining: app.backgroundTimeRemaining?.seconds,
                         backgroundTasks: app.openBackgroundTaskCount, transferBytes: transferBytes[app.name],
                         counters: registry.counters(of: app.name))
    }

    /// `session` has scrape work to do: it gets a share of the next turns.
    func wantsWork(_ session: MetricsSession) {
        if !working.contains(where: { $0 === session }) { working.append(session) }
        if pump?.isArmed == false { pump?.arm(after: .zero) }
    }

    /// One turn's work: the scrapes that have some, in turn, until `workPerTurn` is spent.
    private func work() {
        turnsWorked &+= 1
        let end = MonotonicTime.now() + limits.workPerTurn
        repeat {
            guard let session = working.first else { break }
            working.removeFirst()
            if session.step() { working.append(session) }
        } while MonotonicTime.now() < end
        if !working.isEmpty { pump?.arm(after: .zero) }
    }
}
