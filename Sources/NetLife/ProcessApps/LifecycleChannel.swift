// The lifecycle protocol of process apps (docs/process-apps.md), spoken over the Unix stream socket whose
// descriptor number is in the program's NETLIFE_EVENTS: its codec as a pure value. Like TransitionPipeline,
// `LifecycleChannelState` decides and its owner performs: it is fed bytes the program sent and stages to
// deliver, and returns actions (lines to send, a stage completed, a task to end, a VoIP declaration, a
// cut-off). Its tasks are what it asks its owner on the spot (`ProgramTasks`: begin one; is this id an open
// task of the program), so that a line that follows a begin-task in the same read is handled knowing the
// task, however the bytes were split. Ending one is an action, performed after the read: ending a task may
// suspend the app, which must not happen while the channel is being changed.
//
// It keeps no clock and no tasks of its own. The stage's budget is the App's TransitionPipeline's, whose
// watchdog kills the program when a stage is not answered in time; the channel only tells the program how
// much of it is left. The tasks are the app's BackgroundTaskRegistry's alone (their origin says which the
// program began; their names, expiration and deadlines): a program ends only its own, and they end with the
// channel.
//
// Framing: one JSON object a line (UTF-8, `\n`-terminated), at most 4 KiB a line either way. Members a side
// does not know are ignored, so that a later version can add some. A line that is too long, not JSON, not an
// object, or not exactly one known request is answered with `{"error": ...}` and counted; at 16 errors the
// program is cut off (its channel closed, the app going on without the protocol).
//
// The program opts in by sending `{"hello": 1}` (the version it speaks), answered with `{"hello": 1}`. Until
// then no stage is sent to it or waits for it: a program that ignores NETLIFE_EVENTS still gets the policy
// steps. Task requests work without a hello.
//
// netlifed to the program:
//   {"hello": 1}
//   {"event": "did-enter-background", "budget_ms": 5000, "listeners": "stop-polling"}
//       One a stage of a transition, named as the delegate's callbacks are (did-finish-launching,
//       will-resign-active, did-enter-background, will-enter-foreground, did-become-active, will-terminate).
//       `budget_ms`: the time left before the watchdog kills the program. `listeners` (only in stages that
//       shut down or reopen them): "stop-polling" when its listeners were shut down (their epoll reports
//       EPOLLHUP without pause until they listen again), "resume-polling" when they listen again.
//   {"task": ID, "name": "upload"}     the answer to begin-task; ID 0: refused (suspended, time spent, full)
//   {"task-expiring": ID, "budget_ms": N}   the background time is ending: end the task, or answer
//                                           {"done": "task-expiring", "task": ID}, within budget_ms
//   {"voip": FD}                       the answer to voip: reclaim will spare that descriptor's socket
//   {"error": "why"}                   the answer to a line that could not be taken
// The program to netlifed:
//   {"hello": 1}
//   {"done": "did-enter-background"}   the stage's work is finished
//   {"done": "task-expiring", "task": ID}   the expiration handler is finished (the task may stay open);
//                                           accepted for one of its tasks, and changes nothing: the
//                                           registry's grace is what bounds a task told it is expiring
//   {"begin-task": "name"}             or {"begin-task": null}; a name is at most 256 bytes
//   {"end-task": ID}                   only the program's own open tasks
//   {"voip": FD}                       one of its descriptors is a VoIP socket (at most 64)
//
// The owner's shell reads at most a bounded number of bytes a loop turn (so at most that many lines), and
// cuts the program off when what waits to be sent to it passes `maxPendingOutputBytes` (a program that
// sends requests and never reads the answers).

import NetLifeEvent
import NetLifeJSON

/// The protocol state of one program's channel.
public struct LifecycleChannelState: Sendable {
    /// The protocol's version, in `hello`.
    public static let protocolVersion = 1
    /// The longest line either way, newline excluded.
    public static let maxLineBytes = 4096
    /// Errors after which the program is cut off.
    public static let maxErrors = 16
    /// The most descriptors a program may declare VoIP.
    public static let maxVoIPDescriptors = 64
    /// What may wait to be sent to a program before its shell cuts it off.
    public static let maxPendingOutputBytes = 64 * 1024

    /// What the owner must do.
    public enum Action: Equatable, Sendable {
        /// Send this line (it ends with its newline).
        case send(String)
        /// The program finished this stage: perform the pipeline's next step.
        case stageCompleted(LifecycleEvent)
        /// End this task, one the program began and has open, on the app's registry.
        case endTask(BackgroundTaskIdentifier)
        /// The channel is over: end every task the program began, since nobody is left to end them.
        case endProgramTasks
        /// Spare the socket of this descriptor of the program when reclaiming.
        case declareVoIP(CInt)
        /// Close the channel and go on without the protocol; the reason is for the log.
        case cutOff(String)
    }

    /// Whether the program said hello: stages are sent to it and wait for its answer.
    public private(set) var isSubscribed: Bool
    /// Whether the channel is over: cut off or closed by the program. Everything it is fed afterwards is
    /// ignored, and stages complete at once.
    public private(set) var isClosed = false
    /// The stage sent and waiting for the program's answer (how long it may wait is the pipeline's).
    public private(set) var awaited: LifecycleEvent?
    /// Errors so far.
    public private(set) var errorCount = 0
    /// Descriptors the program declared VoIP.
    public private(set) var voipDescriptors: Set<CInt> = []
    /// The tasks this read asked to end: its owner ends them after the read.
    private var endingInThisRead: Set<BackgroundTaskIdentifier> = []
    /// The start of a line not yet ended; `skipping` while the rest of an overlong line is thrown away.
    private var partialLine: [UInt8] = []
    private var skipping = false

    /// - Parameter subscribed: true when the app's configuration says its program speaks the protocol from
    ///   the start (its did-finish-launching waits for the answer); otherwise it must say hello.
    public init(subscribed: Bool = false) {
        isSubscribed = subscribed
    }

    // MARK: Stages

    /// Sends a stage to the program, which has what is left of the pipeline's `budget` to answer (the
    /// pipeline's watchdog enforces it); it completes at once when the program has not said hello or the
    /// channel is closed. A stage still awaited is replaced (its answer is then an error).
    public mutating func deliver(_ event: LifecycleEvent, budget: Duration, listeners: ListenerHint? = nil) -> [Action] {
        guard isSubscribed, !isClosed else { return [.stageCompleted(event)] }
        awaited = event
        return [.send(Self.line(.stage(event, budget: budget, listeners: listeners)))]
    }

    // MARK: Tasks

    /// The registry says the background time of task `id`, one the program began, is ending: the line that
    /// tells the program, or nothing when the channel is closed.
    public func taskExpiring(_ id: BackgroundTaskIdentifier, budget: Duration) -> [Action] {
        guard !isClosed else { return [] }
        return [.send(Self.line(.taskExpiring(id, budget: budget)))]
    }

    // MARK: The program's side

    /// The program closed its end (or its shell cut it off): the stage awaited is over, the tasks it began
    /// end, and the app goes on without the protocol.
    public mutating func peerClosed() -> [Action] {
        guard !isClosed else { return [] }
        return close()
    }

    /// The channel is over: the stage awaited completes, and the tasks the program began end, since nobody
    /// is left to end them (a program cut off by a flood of 1,024 tasks would otherwise hold them, and weigh
    /// on every `status`, until they expire).
    private mutating func close() -> [Action] {
        isClosed = true
        let actions: [Action] = (awaited.map { [.stageCompleted($0)] } ?? []) + [.endProgramTasks]
        awaited = nil
        return actions
    }

    /// Takes bytes the program sent: each complete line is handled in order; an incomplete one waits for
    /// the rest (at most `maxLineBytes` of it are kept; past that it is refused at once and the rest of it
    /// skipped up to its newline). Linear in the bytes.
    ///
    /// - Parameter tasks: the app's registry, asked once for each begin-task line, in order, and for each
    ///   id a line names.
    public mutating func receive(_ bytes: some Collection<UInt8>, tasks: ProgramTasks) -> [Action] {
        endingInThisRead.removeAll()
        var actions: [Action] = []
        var start = bytes.startIndex
        while !isClosed, start != bytes.endIndex {
            let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n"))
            let piece = bytes[start..<(newline ?? bytes.endIndex)]
            if !skipping {
                if partialLine.count + piece.count > Self.maxLineBytes {
                    // Refused as soon as the limit is passed, not at a newline that may never come: the rest
                    // of the line is thrown away as it arrives, and a program that sends one endless line
                    // still meets the error count.
                    skipping = true
                    partialLine.removeAll()
                    actions += refuse("a line longer than \(Self.maxLineBytes) bytes")
                    if isClosed { break }
                } else {
                    partialLine.append(contentsOf: piece)
                }
            }
            guard let newline else { break }
            start = bytes.index(after: newline)
            if skipping {
                skipping = false
            } else {
                let line = partialLine
                partialLine.removeAll(keepingCapacity: true)
                actions += handle(line: line, tasks: tasks)
            }
        }
        return actions
    }

    /// The requests of the protocol, by their member name.
    private enum Request: String, CaseIterable {
        case hello, done, beginTask = "begin-task", endTask = "end-task", voip
    }

    /// Every other member name either side uses, spelled once (the answers to hello and voip use the
    /// request's name).
    enum Member: String {
        case event, budget = "budget_ms", listeners, task, name, taskExpiring = "task-expiring", error
    }

    /// What netlifed sends the program.
    enum Message {
        /// The version netlifed speaks, the answer to the program's hello.
        case hello
        /// A stage of a transition, with the time left to answer it and, in stages that shut the listeners
        /// down or reopen them, the hint.
        case stage(LifecycleEvent, budget: Duration, listeners: ListenerHint?)
        /// The answer to begin-task: the task's id (0: refused) and its name.
        case task(BackgroundTaskIdentifier, name: String?)
        /// A task's background time is ending: end it, or answer within the budget.
        case taskExpiring(BackgroundTaskIdentifier, budget: Duration)
        /// The answer to voip: reclaim will spare that descriptor's socket.
        case voip(CInt)
        /// The answer to a line that could not be taken.
        case error(String)

        var object: JSONObject {
            var object = JSONObject()
            func set(_ member: Member, _ value: JSON) { object.append(member.rawValue, value) }
            switch self {
            case .hello:
                object.append(Request.hello.rawValue, .number(Double(LifecycleChannelState.protocolVersion)))
            case .stage(let event, let budget, let listeners):
                set(.event, .string(event.rawValue))
                set(.budget, .number(LifecycleChannelState.milliseconds(budget)))
                if let listeners { set(.listeners, .string(listeners.rawValue)) }
            case .task(let id, let name):
                set(.task, .number(Double(id)))
                set(.name, name.map(JSON.string) ?? .null)
            case .taskExpiring(let id, let budget):
                set(.taskExpiring, .number(Double(id)))
                set(.budget, .number(LifecycleChannelState.milliseconds(budget)))
            case .voip(let fd):
                object.append(Request.voip.rawValue, .number(Double(fd)))
            case .error(let reason):
                set(.error, .string(reason))
            }
            return object
        }
    }

    private mutating func handle(line: [UInt8], tasks: ProgramTasks) -> [Action] {
        // An empty line (or a lone \r) asks nothing and costs nothing.
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) { return [] }
        let json: JSON
        do {
            json = try JSON.parse(line, maxDepth: 4, maxElements: 16)
        } catch {
            return refuse("not JSON: \(error)")
        }
        guard case .object(let message) = json else { return refuse("a line must be a JSON object") }
        let requests = Request.allCases.filter { message[$0.rawValue] != nil }
        guard requests.count == 1, let request = requests.first else {
            return refuse(requests.isEmpty ? "no known request (hello, done, begin-task, end-task, voip)" : "one request a line")
        }
        let value = message[request.rawValue] ?? .null
        switch request {
        case .hello:
            guard let version = value.intValue, version >= 1 else { return refuse("\"hello\" takes the protocol version, 1") }
            isSubscribed = true
            return [.send(Self.line(.hello))]
        case .done:
            guard let name = value.stringValue else { return refuse("\"done\" takes a stage's name") }
            return done(name, task: message[Member.task.rawValue], tasks: tasks)
        case .beginTask:
            guard value == .null || value.stringValue != nil else { return refuse("\"begin-task\" takes a name or null") }
            let name = value.stringValue
            // Refused rather than shortened: the answer echoes the name, and stays well within a line.
            guard (name?.utf8.count ?? 0) <= BackgroundTaskRegistry.maxNameBytes else {
                return refuse("a task name is at most \(BackgroundTaskRegistry.maxNameBytes) bytes")
            }
            let id = tasks.begin(name)
            return [.send(Self.line(.task(id, name: name)))]
        case .endTask:
            guard let id = Self.taskID(value) else { return refuse("\"end-task\" takes a task id") }
            guard isOpen(id, tasks) else { return refuse("task \(id) was not begun by this program, or has ended") }
            endingInThisRead.insert(id)
            return [.endTask(id)]
        case .voip:
            guard let fd = value.intValue, fd >= 0, fd <= Int(Int32.max) else { return refuse("\"voip\" takes a descriptor number") }
            let descriptor = CInt(fd)
            let answer = Action.send(Self.line(.voip(descriptor)))
            if voipDescriptors.contains(descriptor) { return [answer] }
            guard voipDescriptors.count < Self.maxVoIPDescriptors else { return refuse("at most \(Self.maxVoIPDescriptors) VoIP descriptors") }
            voipDescriptors.insert(descriptor)
            return [.declareVoIP(descriptor), answer]
        }
    }

    private mutating func done(_ name: String, task: JSON?, tasks: ProgramTasks) -> [Action] {
        if name == "task-expiring" {
            guard let id = task.flatMap(Self.taskID), isOpen(id, tasks) else {
                return refuse("no open task of this program has that id")
            }
            return []
        }
        guard let stage = awaited, stage.rawValue == name else {
            return refuse("no \(LifecycleEvent(rawValue: name)?.rawValue ?? "such stage") is awaited")
        }
        awaited = nil
        return [.stageCompleted(stage)]
    }

    /// Whether `id` is an open task of the program that no line of this read has ended.
    private func isOpen(_ id: BackgroundTaskIdentifier, _ tasks: ProgramTasks) -> Bool {
        !endingInThisRead.contains(id) && tasks.isOpen(id)
    }

    /// An error line back, and the cut-off at `maxErrors`.
    private mutating func refuse(_ reason: String) -> [Action] {
        errorCount += 1
        let answer = Action.send(Self.line(.error(reason)))
        guard errorCount >= Self.maxErrors else { return [answer] }
        return [answer, .cutOff("\(errorCount) protocol errors, the last: \(reason)")] + close()
    }

    // MARK: Encoding

    /// A message as one line, newline included; never longer than `maxLineBytes` (a string that would make
    /// it longer is shortened).
    static func line(_ message: Message) -> String {
        var text = JSON.object(message.object).serialized
        if text.utf8.count > maxLineBytes, case .error(let reason) = message {
            text = JSON.object(Message.error(String(reason.prefix(256))).object).serialized
        }
        return text + "\n"
    }

    static func milliseconds(_ duration: Duration) -> Double {
        max(0, (duration.milliseconds).rounded(.up))
    }

    private static func taskID(_ value: JSON) -> BackgroundTaskIdentifier? {
        guard let id = value.intValue, id > 0 else { return nil }
        return BackgroundTaskIdentifier(id)
    }
}

/// The app's background tasks as a program's channel sees them: the registry holds them, and says which the
/// program began (their origin).
public struct ProgramTasks {
    /// Begins a task of the program (its name, or nil); its id, 0 when refused.
    public var begin: (String?) -> BackgroundTaskIdentifier
    /// Ends `id` if it is an open task the program began (the channel's `.endTask`).
    public var end: (BackgroundTaskIdentifier) -> Void
    /// Whether `id` is an open task the program began.
    public var isOpen: (BackgroundTaskIdentifier) -> Bool
    /// Ends every task the program began (its channel is over).
    public var endAll: () -> Void

    public init(begin: @escaping (String?) -> BackgroundTaskIdentifier, end: @escaping (BackgroundTaskIdentifier) -> Void,
                isOpen: @escaping (BackgroundTaskIdentifier) -> Bool, endAll: @escaping () -> Void) {
        self.begin = begin
        self.end = end
        self.isOpen = isOpen
        self.endAll = endAll
    }

    /// No task begins and none is open (a program whose app has gone).
    public static var none: ProgramTasks { ProgramTasks(begin: { _ in 0 }, end: { _ in }, isOpen: { _ in false }, endAll: {}) }
}
