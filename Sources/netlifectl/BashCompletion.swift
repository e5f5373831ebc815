// `netlifectl completion bash`: the bash completion script, made from the command table as
// swift-argument-parser makes its own from its commands. Every command word, every option of every command
// (the value of one that takes a path completed as a file name, of one that takes an app as an app name), the
// values an argument may take (`mode APP idle|continuous`), file names where an argument is a path, and app
// names where it is an app: those of the running daemon, asked with `netlifectl --json status`.

import NetLifeControl

enum BashCompletion {
    /// The shells netlifectl writes a completion script for.
    static let shells = ["bash"]

    /// netlifectl's own options before a command, and those that may follow one.
    static let leadingOptions = ["-H", "--host", "--control", "--json", "--version", "--help"]
    static let trailingOptions = ["-H", "--host", "--control", "--json", "--help"]
    /// netlifectl's own options that take a path.
    static let valueOptions = ["--control"]
    /// netlifectl's own options that take a host (completed from the host names the system knows).
    static let hostOptions = ["-H", "--host"]

    /// How the word at some place is completed.
    enum Completion {
        case none
        case apps
        case files
        case words([String])
    }

    /// How an argument's value is completed: an app's name, a path, one of its values, or nothing.
    static func completion(of argument: ControlArgument) -> Completion {
        if let values = argument.values { return .words(values) }
        if argument.isPath { return .files }
        return argument.member == .app ? .apps : .none
    }

    /// The first words of every command, netlifectl's own last (`status`, ..., `task`, ..., `help`).
    static var firstWords: [String] {
        var seen: Set<String> = []
        return (ControlCommand.all.map { $0.words[0] } + ControlTool.ownCommands.map(\.name)).filter { seen.insert($0).inserted }
    }

    /// The words that may follow each proper prefix of a command's words: `task` is followed by begin, end and
    /// list, `transfers` by cancel.
    static var nextWords: [(prefix: String, words: [String])] {
        var next: [(prefix: String, words: [String])] = []
        for command in ControlCommand.all {
            for count in 1..<command.words.count {
                let prefix = command.words.prefix(count).joined(separator: " ")
                let word = command.words[count]
                if let index = next.firstIndex(where: { $0.prefix == prefix }) {
                    if !next[index].words.contains(word) { next[index].words.append(word) }
                } else {
                    next.append((prefix, [word]))
                }
            }
        }
        return next
    }

    /// `text` as one word of bash: in double quotes, with what bash expands there escaped.
    static func quoted(_ text: String) -> String {
        var word = "\""
        for character in text {
            if "\"$`\\".contains(character) { word.append("\\") }
            word.append(character)
        }
        return word + "\""
    }

    /// The `case` pattern `"COMMAND:WORD"`: an option or a place of the command's words.
    static func pattern(_ command: [String], _ word: String) -> String {
        quoted(command.joined(separator: " ") + ":" + word)
    }

    /// The branches of a `case`, `indent` spaces in: one per action that `items` need, with every pattern
    /// that leads to it, in the order first needed. Items that complete to nothing are left out unless
    /// `keepingNone` (a value completed to nothing is still a value to skip).
    static func branches(_ items: [(pattern: String, completion: Completion)], indent: Int, keepingNone: Bool = false,
                         action: (Completion) -> String) -> [String] {
        var order: [String] = []
        var patterns: [String: [String]] = [:]
        for item in items {
            if case .none = item.completion, !keepingNone { continue }
            let text = action(item.completion)
            if patterns[text] == nil { order.append(text) }
            patterns[text, default: []].append(item.pattern)
        }
        return order.map { text in alternatives(patterns[text] ?? [], indent: indent) + ")" + (text.isEmpty ? "" : " " + text) + " ;;" }
    }

    /// The patterns `a | b | c` of a branch, `indent` spaces in, continued on further lines (each ending in a
    /// backslash) rather than past 110 columns.
    static func alternatives(_ patterns: [String], indent: Int) -> String {
        var lines = [String(repeating: " ", count: indent)]
        for (index, pattern) in patterns.enumerated() {
            let piece = index == 0 ? pattern : " | " + pattern
            if index > 0, let last = lines.last, last.count + piece.count > 110 {
                lines[lines.count - 1] += " | \\"
                lines.append(String(repeating: " ", count: indent + 4) + pattern)
            } else {
                lines[lines.count - 1] += piece
            }
        }
        return lines.joined(separator: "\n")
    }

    /// The script.
    static var script: String {
        let commands = ControlCommand.all
        let names = commands.map { $0.words.joined(separator: " ") }
        let ownNames = ControlTool.ownCommands.map(\.name)
        let longest = commands.map(\.words.count).max() ?? 1

        // The value of an option: netlifectl's own --control, then each command's.
        var values: [(pattern: String, completion: Completion)] = valueOptions.map { ("*:" + $0, .files) }
            + hostOptions.map { ("*:" + $0, .none) }
        for command in commands {
            for option in command.options where option.metavar != nil {
                let value = option.argument.map(completion(of:)) ?? Completion.none
                values.append((pattern(command.words, option.name), value))
            }
        }
        let valueCases = branches(values, indent: 8, keepingNone: true) { completion in
            switch completion {
            case .none: ""
            case .apps: "_netlifectl_words \"$(_netlifectl_apps)\""
            case .files: "_netlifectl_files"
            case .words(let words): "_netlifectl_words \(quoted(words.joined(separator: " ")))"
            }
        }

        // The arguments after the command words, by their place.
        var arguments: [(pattern: String, completion: Completion)] = []
        for command in commands {
            for (index, argument) in command.positionals.enumerated() {
                arguments.append((pattern(command.words, String(index)), completion(of: argument)))
            }
        }
        arguments.append((pattern(["help"], "0"), .words(firstWords)))
        arguments.append((pattern(["completion"], "0"), .words(shells)))
        let argumentCases = branches(arguments, indent: 12) { completion in
            switch completion {
            case .none: ""
            case .apps: "list+=\" $(_netlifectl_apps)\""
            case .files: "_netlifectl_files; return 0"
            case .words(let words): "list+=\(quoted(" " + words.joined(separator: " ")))"
            }
        }

        // Each command's options, with those netlifectl reads wherever they stand.
        let options = commands.map { command in
            (quoted(command.words.joined(separator: " ")), Completion.words(command.options.map(\.name) + trailingOptions))
        } + ownNames.map { (quoted($0), Completion.words(["--help"])) }
        let optionCases = branches(options, indent: 12) { completion in
            if case .words(let words) = completion { "list=" + quoted(words.joined(separator: " ")) } else { "" }
        }
        let nextCases = [("", firstWords)] + nextWords.map { ($0.prefix, $0.words) }

        return """
            # bash completion for netlifectl, written by `netlifectl completion bash` from its command table: its
            # commands and their words, every command's options, the values an argument may take, file names where
            # a path goes and, where an app goes, the names of the apps of the running daemon (from `netlifectl
            # --json status`; none when no daemon answers within a second).

            # The app names of the daemon at the control socket the command line names, one a line.
            _netlifectl_apps() {
                local -a control=()
                local i
                for ((i = 1; i < COMP_CWORD; i++)); do
                    case ${COMP_WORDS[i]} in
                        --control)
                            # `--control=PATH` is three words when COMP_WORDBREAKS holds '=', as by default.
                            if [[ ${COMP_WORDS[i + 1]-} == = ]]; then
                                control=(--control "${COMP_WORDS[i + 2]-}")
                            else
                                control=(--control "${COMP_WORDS[i + 1]-}")
                            fi
                            ;;
                        --control=*) control=("${COMP_WORDS[i]}") ;;
                    esac
                done
                local status
                status=$(timeout 1 "${COMP_WORDS[0]}" "${control[@]}" --json status 2>/dev/null) || return 0
                if command -v python3 > /dev/null 2>&1; then
                    python3 -c 'import json, sys
            for app in json.loads(sys.stdin.read()).get("apps", []):
                print(app["name"])' <<< "$status" 2>/dev/null
                else
                    # Without python3: an app's object is the one whose name is followed by its state.
                    grep -o '{"name":"[^"]*","state":' <<< "$status" | sed 's/^{"name":"\\([^"]*\\)".*/\\1/'
                fi
            }

            # The candidates among the words $1 for the word being completed.
            _netlifectl_words() {
                mapfile -t COMPREPLY < <(compgen -W "$1" -- "$cur")
            }

            # File names for the word being completed.
            _netlifectl_files() {
                compopt -o filenames 2>/dev/null
                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            }

            # The command that the words name, the longest match (`transfers cancel`, not `transfers`), and how many
            # words name it: none, an empty command and a length of 0.
            _netlifectl_command() {
                local i
                for ((length = \(longest); length > 0; length--)); do
                    command=
                    for ((i = 0; i < length; i++)); do command+="${command:+ }${words[i]-}"; done
                    case $command in
            \(alternatives((names + ownNames).map(quoted), indent: 12))) return 0 ;;
                    esac
                done
                command=
            }

            # Whether the option $2 of the command $1 takes a value.
            _netlifectl_takes_value() {
                case "$1:$2" in
            \(alternatives(values.map(\.pattern), indent: 8))) return 0 ;;
                esac
                return 1
            }

            # Completes the value of the option $2 of the command $1; fails when it takes none.
            _netlifectl_value() {
                case "$1:$2" in
            \(valueCases.joined(separator: "\n"))
                    *) return 1 ;;
                esac
            }

            _netlifectl() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
                COMPREPLY=()
                # `--output=PATH` is three words when COMP_WORDBREAKS holds '=': the value after it is completed.
                if [[ $cur == = ]]; then
                    cur=
                elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then
                    prev=${COMP_WORDS[COMP_CWORD - 2]}
                fi

                # The words before the completed one that are neither options nor their values: the command's
                # words, then its arguments.
                local -a words=()
                local command length i
                for ((i = 1; i < COMP_CWORD; i++)); do
                    case ${COMP_WORDS[i]} in
                        -*)
                            _netlifectl_command
                            if _netlifectl_takes_value "$command" "${COMP_WORDS[i]}"; then
                                i=$((i + 1))
                                [[ ${COMP_WORDS[i]-} == = ]] && i=$((i + 1))
                            fi
                            ;;
                        *) words+=("${COMP_WORDS[i]}") ;;
                    esac
                done
                _netlifectl_command
                if [[ $prev == -* ]] && _netlifectl_value "$command" "$prev"; then
                    return 0
                fi

                local list=
                if [[ $cur == -* ]]; then
                    case $command in
                        "") if ((${#words[@]} == 0)); then list=\(quoted(leadingOptions.joined(separator: " "))); else list=\(quoted(trailingOptions.joined(separator: " "))); fi ;;
            \(optionCases.joined(separator: "\n"))
                    esac
                    _netlifectl_words "$list"
                    return 0
                fi

                # The next command word: a first one, or one that follows a family's (`task`: begin, end, list) or a
                # command's (`transfers`: cancel).
                local line= word
                for word in "${words[@]}"; do line+="${line:+ }$word"; done
                case $line in
            \(nextCases.map { "        \(quoted($0.0))) list=\(quoted($0.1.joined(separator: " "))) ;;" }.joined(separator: "\n"))
                esac
                # The argument at its place after the command's words.
                if [[ -n $command ]]; then
                    case "$command:$((${#words[@]} - length))" in
            \(argumentCases.joined(separator: "\n"))
                    esac
                fi
                _netlifectl_words "$list"
            }
            complete -F _netlifectl netlifectl

            """
    }
}
