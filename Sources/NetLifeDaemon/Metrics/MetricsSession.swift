// One connection to the metrics endpoint: it reads a request head, answers it (MetricsAnswer), and for a
// scrape writes the text in the slices its server gives it (`step()`), then waits for the next request on a
// kept connection. Reading pauses while an answer is written, so a client that pipelines requests waits in
// the kernel, not in netlifed's memory.

import NetLife
import NetLifeEvent
import NetLifeServices

/// A connection to the metrics endpoint.
final class MetricsSession: ConnectionDelegate {
    /// Unhandled request bytes past which reading pauses until they are handled.
    static let maxBufferedInput = 64 * 1024

    let connection: Connection
    private weak var server: MetricsServer?
    private var parser = HTTPRequestParser()
    private var deadline: EventTimer?
    /// Reads the next request at the next turn, after an answer on a kept connection: one request per turn,
    /// however many a client pipelines.
    private var continuation: EventTimer?

    /// What the session does now.
    private enum Phase {
        /// Waiting for a request: `begun` once its first byte came (and on a new connection), else idle
        /// between requests.
        case reading(begun: Bool)
        /// Writing a scrape.
        case scraping(Scrape)
        /// Closing or closed.
        case done
    }

    /// A scrape being written: the apps to read, the scrape, how the body goes, whether the connection is kept
    /// afterwards. A class, so that each slice changes it in place (a value in the phase would be copied,
    /// apps and text, at every slice).
    final class Scrape {
        var scrape: MetricsScrape
        let apps: [App]
        let transferBytes: [String: [UInt64]]
        let chunked: Bool
        let keepAlive: Bool
        var text = Exposition(reservingCapacity: 64 * 1024)
        /// What it cost, for the log: the time its steps took, the bytes sent, the loop turns it worked in,
        /// and the most work it did in one turn.
        var work = Duration.zero
        var bytes = 0
        var turns = 0
        var lastTurn = -1
        var turnWork = Duration.zero
        var longestTurn = Duration.zero

        /// Counts a step of `duration` made in the server's turn `turn`.
        func count(_ duration: Duration, turn: Int) {
            work += duration
            if turn != lastTurn {
                lastTurn = turn
                turns += 1
                turnWork = .zero
            }
            turnWork += duration
            longestTurn = max(longestTurn, turnWork)
        }

        init(scrape: MetricsScrape, apps: [App], transferBytes: [String: [UInt64]], chunked: Bool, keepAlive: Bool) {
            self.scrape = scrape
            self.apps = apps
            self.transferBytes = transferBytes
            self.chunked = chunked
            self.keepAlive = keepAlive
        }
    }

    private var phase = Phase.reading(begun: true)
    /// While a scrape waits for its client to read: the answer's bytes unsent at the last look, and when the
    /// client last took some.
    private var stall: (unsent: Int, since: MonotonicTime)?
    /// The server's bounds (what is left of them once the server is gone: the defaults).
    private var limits: MetricsServer.Limits { server?.limits ?? MetricsServer.Limits() }

    init(connection: Connection, server: MetricsServer, loop: EventLoop) {
        self.connection = connection
        self.server = server
        deadline = EventTimer(loop: loop) { [weak self] in self?.deadlinePassed() }
        continuation = EventTimer(loop: loop) { [weak self] in self?.readRequest() }
        connection.delegate = self
        deadline?.arm(after: server.limits.requestTimeout)
    }

    /// Closes the connection at once (the daemon stops).
    func close() {
        phase = .done
        connection.close(.now)
    }

    // MARK: Connection events

    func connectionDidRead(_ connection: Connection) {
        if case .reading(false) = phase, !connection.input.isEmpty {
            phase = .reading(begun: true)
            deadline?.arm(after: limits.requestTimeout)
        }
        readRequest()
    }

    func connectionDidReachEnd(_ connection: Connection) {
        // A client that half-closes after its request is answered; with nothing (more) to answer, close.
        guard case .reading = phase else { return }
        readRequest()
        if case .reading = phase { finish(closing: true) }
    }

    func connectionDidDrainOutput(_ connection: Connection) {
        guard case .scraping = phase else { return }
        stall = nil
        deadline?.cancel()
        server?.wantsWork(self)
    }

    func connectionDidClose(_ connection: Connection, error: SystemError?) {
        phase = .done
        deadline?.close()
        deadline = nil
        continuation?.close()
        continuation = nil
        server?.sessionClosed(self)
    }

    // MARK: Requests

    /// Reads the request head buffered, if it is whole, and answers it.
    private func readRequest() {
        guard case .reading = phase, connection.state == .open else { return }
        let bytes = connection.input.peekBytes(limit: HTTPRequestParser.maxHeadBytes + 1)
        let answer: MetricsAnswer
        do {
            guard let (head, consumed) = try parser.parse(bytes) else { return }
            connection.input.drain(consumed)
            answer = MetricsAnswer(head)
        } catch {
            answer = MetricsAnswer(error)
        }
        respond(answer)
    }

    private func respond(_ answer: MetricsAnswer) {
        deadline?.cancel()
        connection.output.append(answer.bytes)
        connection.flush()
        guard connection.state == .open else { return }
        guard case .metrics(true, let chunked, let keepAlive) = answer, let server else {
            return finish(closing: !answer.keepsConnection)
        }
        // The answer is written while it is made; requests pipelined meanwhile wait in the kernel.
        connection.pauseReading()
        let (scrape, apps) = server.makeScrape()
        phase = .scraping(Scrape(scrape: scrape, apps: apps, transferBytes: server.transferBytes(), chunked: chunked,
                                 keepAlive: keepAlive))
        server.wantsWork(self)
    }

    /// The answer is written: close, or wait for the next request (one already buffered is read at the next
    /// turn). A client that has ended its side and sent nothing more is done.
    private func finish(closing: Bool) {
        guard connection.state == .open else { return }
        if closing || (connection.inputEnded && connection.input.isEmpty) {
            phase = .done
            deadline?.cancel()
            connection.close(.afterFlush)
            return
        }
        parser.reset()
        let pending = !connection.input.isEmpty
        phase = .reading(begun: pending)
        deadline?.arm(after: pending ? limits.requestTimeout : limits.idleTimeout)
        // Requests a client pipelines faster than they are answered wait in the kernel past this much.
        if connection.input.count > Self.maxBufferedInput { connection.pauseReading() } else { connection.resumeReading() }
        if pending { continuation?.arm(after: .zero) }
    }

    // MARK: Scraping

    /// A slice of the scrape: a few apps read, or a few units of text written and sent. Returns whether the
    /// session wants another slice now (false when it is done, or waits for its client to read).
    func step() -> Bool {
        guard case .scraping(let work) = phase, connection.state == .open, let server else { return false }
        let started = MonotonicTime.now()
        if work.scrape.apps.count < work.apps.count {
            let end = min(work.apps.count, work.scrape.apps.count + MetricsServer.appsPerStep)
            for app in work.apps[work.scrape.apps.count..<end] {
                work.scrape.apps.append(server.sample(app, transferBytes: work.transferBytes))
            }
            work.count(MonotonicTime.now() - started, turn: server.turnsWorked)
            return true
        }
        let finished = work.scrape.render(into: &work.text, maxUnits: MetricsServer.unitsPerStep, maxBytes: MetricsServer.chunkBytes)
        var ready: [UInt8] = []
        if work.text.bytes.count >= MetricsServer.chunkBytes || finished {
            ready = work.text.bytes
            work.text.removeAll()
        }
        if finished { phase = .reading(begun: false) }
        if !ready.isEmpty { connection.output.append(work.chunked ? MetricsAnswer.chunk(ready) : ready) }
        if finished, work.chunked { connection.output.append(MetricsAnswer.lastChunk) }
        connection.flush()
        work.bytes += ready.count
        work.count(MonotonicTime.now() - started, turn: server.turnsWorked)
        if finished {
            server.logger.debug("scrape of \(work.apps.count) app(s): \(work.bytes) bytes in \(work.turns) loop turn(s), \(Self.text(work.work)) of work, at most \(Self.text(work.longestTurn)) in one turn")
            finish(closing: !work.keepAlive)
            return false
        }
        guard connection.state == .open else { return false }
        if connection.pauseReadingIfOutputIsHigh() {
            // Resumed by connectionDidDrainOutput; a client that takes nothing for writeTimeout is reset.
            stall = (connection.output.count, MonotonicTime.now())
            deadline?.arm(after: limits.writeTimeout / 4)
            return false
        }
        return true
    }

    /// `1.234 ms`.
    private static func text(_ duration: Duration) -> String {
        let microseconds = duration.nanoseconds / 1000
        let fraction = String(microseconds % 1000)
        return "\(microseconds / 1000).\(String(repeating: "0", count: 3 - fraction.count) + fraction) ms"
    }

    // MARK: Deadlines

    private func deadlinePassed() {
        switch phase {
        case .reading(let begun):
            if begun {
                respond(.timedOut)
            } else {
                finish(closing: true)
            }
        case .scraping:
            guard let stall else { return }
            let now = MonotonicTime.now(), unsent = connection.output.count
            if unsent < stall.unsent {
                self.stall = (unsent, now)
            } else if now - stall.since >= limits.writeTimeout {
                // The client took nothing of its answer for writeTimeout.
                phase = .done
                return connection.close(.reset)
            }
            deadline?.arm(after: limits.writeTimeout / 4)
        case .done:
            break
        }
    }
}
