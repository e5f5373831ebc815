# bash completion for netlifectl: its options, its commands (the table of `netlifectl --help`) and, where a
# command takes an app, the names of the apps of the running daemon (from `netlifectl --json status`; none
# when no daemon answers within a second).

# The app names of the daemon at the control socket the command line names, one a line.
_netlifectl_apps() {
    local -a control=()
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            --control) control=(--control "${COMP_WORDS[i + 1]}") ;;
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
        grep -o '{"name":"[^"]*","state":' <<< "$status" | sed 's/^{"name":"\([^"]*\)".*/\1/'
    fi
}

_netlifectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local commands="status launch foreground background suspend reclaim lock terminate interrupt memory-pressure task mode download upload transfers watch reload version debug help"
    COMPREPLY=()

    case $prev in
        --control | --output)
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            return 0
            ;;
        --name | --free) return 0 ;;
    esac

    # The words of the command so far, without netlifectl's own options and their values.
    local -a words=()
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            --control | --output | --name | --free) ((i++)) ;;
            -*) ;;
            *) words+=("${COMP_WORDS[i]}") ;;
        esac
    done

    if [ ${#words[@]} = 0 ]; then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "--control --json --version --help" -- "$cur")
        else
            mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
        fi
        return 0
    fi

    local command=${words[0]} options="--json --help" argument
    argument=$((${#words[@]} - 1))   # how many words the command has after its name
    case $command in
        task)
            if [ ${#words[@]} = 1 ]; then
                mapfile -t COMPREPLY < <(compgen -W "begin end list" -- "$cur")
                return 0
            fi
            command="task ${words[1]}"
            argument=$((argument - 1))
            ;;
        interrupt)
            if [ ${#words[@]} = 1 ]; then
                mapfile -t COMPREPLY < <(compgen -W "begin end" -- "$cur")
                return 0
            fi
            command="interrupt ${words[1]}"
            argument=$((argument - 1))
            ;;
        debug)
            [ ${#words[@]} = 1 ] && mapfile -t COMPREPLY < <(compgen -W "stall" -- "$cur")
            return 0
            ;;
    esac
    case $command in
        launch) options+=" --background" ;;
        "task begin") options+=" --name" ;;
        download) options+=" --output --no-wait" ;;
        upload) options+=" --no-wait" ;;
        memory-pressure) options+=" --free" ;;
    esac
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
        return 0
    fi
    case $command in
        help)
            [ "$argument" = 0 ] && mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur") ;;
        status | launch | foreground | background | suspend | reclaim | terminate | transfers | watch | \
        "task begin" | "task end" | "task list" | "interrupt begin" | "interrupt end" | download)
            [ "$argument" = 0 ] && mapfile -t COMPREPLY < <(compgen -W "$(_netlifectl_apps)" -- "$cur") ;;
        mode)
            case $argument in
                0) mapfile -t COMPREPLY < <(compgen -W "$(_netlifectl_apps)" -- "$cur") ;;
                1) mapfile -t COMPREPLY < <(compgen -W "idle continuous" -- "$cur") ;;
            esac
            ;;
        upload)
            case $argument in
                0) mapfile -t COMPREPLY < <(compgen -W "$(_netlifectl_apps)" -- "$cur") ;;
                1) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
            esac
            ;;
    esac
    return 0
}
complete -F _netlifectl netlifectl
