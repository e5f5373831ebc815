// Which suspended apps memory pressure ends (docs/data-sockets.md), as pure functions: jetsam ends the largest
// suspended app first and stops once it has freed what it needs; VoIP apps are ended last, because iOS
// relaunches them at once and so frees their memory only for a while. The daemon measures each app, performs
// the terminations and relaunches the VoIP apps it ended; this file only decides. `netlifectl memory-pressure`
// asks for an amount (or everything); the kernel's pressure trigger asks for one step of the same ladder per
// event, since the kernel raises its next event only if the stall goes on (at most one per window): the
// ladder stops as soon as the pressure falls, and no amount has to be guessed.

/// A suspended app as memory pressure weighs it.
public struct JetsamCandidate: Equatable, Sendable {
    /// The app's name (unique among the candidates).
    public var name: String
    /// The memory it holds: what `App.heldBytes` measures.
    public var bytes: Int
    /// Whether it has a VoIP socket: it is ended after every other app, and relaunched into the background.
    public var voip: Bool

    public init(name: String, bytes: Int, voip: Bool) {
        self.name = name
        self.bytes = bytes
        self.voip = voip
    }
}

/// What one event of the kernel's memory pressure trigger does.
public enum PressureStep: Equatable, Sendable {
    /// End this app without callbacks (and relaunch it into the background when it is a VoIP app).
    case end(JetsamCandidate)
    /// No app is suspended: nothing is ended (an app that runs is never ended for memory pressure).
    case nothingSuspended
}

/// The memory pressure rules, as pure functions.
public enum MemoryPressureRules {
    /// The step for one event of the kernel's pressure trigger: the first app of the ladder (`appsToEnd`
    /// without an amount), or nothing when no app is suspended.
    public static func step(_ candidates: [JetsamCandidate]) -> PressureStep {
        appsToEnd(candidates, free: nil).first.map(PressureStep.end) ?? .nothingSuspended
    }

    /// The candidates to end, in the order they are ended: the apps without a VoIP socket, then the VoIP apps,
    /// each group largest first (equal sizes by name, so that the order never depends on the input's). With
    /// `free`, the list stops at the first app that brings the bytes ended to at least `free` (none when
    /// `free` is 0 or less; every candidate when they hold less than `free` together); without it, every
    /// candidate is ended.
    public static func appsToEnd(_ candidates: [JetsamCandidate], free: Int?) -> [JetsamCandidate] {
        let ordered = candidates.sorted { first, second in
            if first.voip != second.voip { return !first.voip }
            if first.bytes != second.bytes { return first.bytes > second.bytes }
            return first.name < second.name
        }
        guard let free else { return ordered }
        var chosen: [JetsamCandidate] = []
        var freed = 0
        for candidate in ordered where freed < free {
            chosen.append(candidate)
            let (sum, overflow) = freed.addingReportingOverflow(max(0, candidate.bytes))
            freed = overflow ? .max : sum
        }
        return chosen
    }
}
