// `[daemon] memory-pressure-trigger = some|full STALL WINDOW` (docs/configuration.md): a kernel pressure (PSI)
// trigger as the config writes it (`some 150ms 2s`) and as the kernel takes it (`some 150000 2000000`, in
// microseconds). `some` counts time in which at least one of the cgroup's tasks stalled on memory, `full` time
// in which all of them did; the trigger fires when the stall adds up to STALL within any WINDOW. The reader
// checks what the kernel checks of every process: a window from 500ms to 10s and a stall above 0 and at most the
// window. What it checks only of a process without CAP_SYS_RESOURCE (a window that is a multiple of 2 s) is
// left to the kernel, whose refusal says so (PressureTriggerRefusal): the same config runs with the capability.

import NetLife
import NetLifeEvent

/// A kernel memory pressure trigger.
public struct PressureTrigger: Equatable, Sendable {
    /// Which stall is counted.
    public enum Kind: String, Sendable, CaseIterable {
        /// At least one task stalled.
        case some
        /// Every task stalled at once.
        case full
    }

    public var kind: Kind
    /// How much stall within a window fires the trigger.
    public var stall: Duration
    /// The window.
    public var window: Duration

    /// The windows the kernel takes.
    public static let windows: ClosedRange<Duration> = .milliseconds(500) ... .seconds(10)
    /// The step of the windows the kernel takes from a process without CAP_SYS_RESOURCE (Linux 6.5 and later).
    public static let unprivilegedWindowStep: Duration = .seconds(2)

    public init(kind: Kind, stall: Duration, window: Duration) {
        self.kind = kind
        self.stall = stall
        self.window = window
    }

    /// Why a text is no trigger.
    public enum ParseError: Error, Equatable, Sendable {
        /// Not three words, `some` or `full` and two durations.
        case syntax
        /// The window lies outside 500ms to 10s.
        case window(Duration)
        /// The stall is 0, or longer than the window.
        case stall(Duration, window: Duration)
    }

    /// Reads `some 150ms 2s`: the kind, the stall and the window, separated by blanks.
    public init(configText text: String) throws(ParseError) {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard words.count == 3, let kind = Kind(rawValue: words[0]), let stall = Duration(configText: words[1]),
              let window = Duration(configText: words[2]) else { throw .syntax }
        guard Self.windows.contains(window) else { throw .window(window) }
        guard stall > .zero, stall <= window else { throw .stall(stall, window: window) }
        self.init(kind: kind, stall: stall, window: window)
    }

    /// `some 150ms 2s`.
    public var configText: String { "\(kind.rawValue) \(stall.configText) \(window.configText)" }

    /// `some 150000 2000000`: what is written to the pressure file (stall and window in microseconds).
    public var kernelText: String { "\(kind.rawValue) \(stall.nanoseconds / 1000) \(window.nanoseconds / 1000)" }

    /// Whether the kernel takes the window from a process without CAP_SYS_RESOURCE: a multiple of 2 s.
    public var windowIsUnprivileged: Bool {
        window.nanoseconds % Self.unprivilegedWindowStep.nanoseconds == 0
    }
}
