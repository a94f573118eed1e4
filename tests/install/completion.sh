#!/bin/bash
# SPDX-License-Identifier: MIT
# The bash completion of retrydctl, driven the way bash drives it
# (COMP_WORDS, COMP_CWORD, then the function): commands, each command's
# options, and option values; every option it offers for `decide` and
# `request` is one retrydctl accepts, and every option it offers for the
# operator commands is in that command's --help (which does not run it).
# usage: completion.sh <source dir> <retrydctl>
set -u
# shellcheck source=/dev/null
source "$1/deploy/bash-completion/retrydctl" || exit 1
retrydctl=$2
status=0

# expect "WORDS..." "EXPECTED": complete the last word.
expect() {
    read -r -a COMP_WORDS <<<"$1"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _retrydctl
    got="${COMPREPLY[*]}"
    if [[ $got != "$2" ]]; then
        echo "FAIL: '$1' completes to '$got', not '$2'" >&2
        status=1
    fi
}
[[ $(complete -p retrydctl) == *"-F _retrydctl"* ]] || { echo "FAIL: not registered" >&2; status=1; }
expect "retrydctl st" "stats status"
expect "retrydctl " "decide request stats top upstreams drain retire status doctor help --help --version -V"
expect "retrydctl d" "decide drain doctor"
expect "retrydctl top --b" "--batch"
expect "retrydctl top --i" "--iterations"
expect "retrydctl help to" "top"
expect "retrydctl retire --h" "--help"
expect "retrydctl doctor --control-socket /nonexistent-dir/x" ""
expect "retrydctl stats --p" "--prometheus --per-process --processes"
expect "retrydctl stats --prometheus --per-process p" "program pid"
expect "retrydctl decide --evidence sent" "sent_no_response"
expect "retrydctl decide --idempotency idempotent_" "idempotent_by_key"
expect "retrydctl request --idempotency-k" "--idempotency-key"
expect "retrydctl drain o" "on off"
expect "retrydctl request -X P" "POST PUT PATCH"

# Each long option offered is accepted by the command (no "unrecognized").
for cmd in decide request; do
    COMP_WORDS=(retrydctl "$cmd" "--")
    COMP_CWORD=2
    _retrydctl
    for opt in "${COMPREPLY[@]}"; do
        [[ $opt == --help || $opt == --version ]] && continue
        out=$("$retrydctl" "$cmd" "$opt" 2>&1 </dev/null)
        if [[ $out == *"unrecognized option"* || $out == *"unknown option"* ]]; then
            echo "FAIL: retrydctl $cmd does not know $opt" >&2
            status=1
        fi
    done
done
# The operator commands: each option offered is in the command's --help,
# and each command offered is one retrydctl knows.
for cmd in stats top upstreams drain retire status doctor; do
    COMP_WORDS=(retrydctl "$cmd" "-")
    COMP_CWORD=2
    _retrydctl
    help=$("$retrydctl" "$cmd" --help </dev/null) || {
        echo "FAIL: retrydctl $cmd --help exits $?" >&2
        status=1
    }
    for opt in "${COMPREPLY[@]}"; do
        if [[ $help != *"$opt"* ]]; then
            echo "FAIL: retrydctl $cmd --help does not mention $opt" >&2
            status=1
        fi
    done
done
COMP_WORDS=(retrydctl help "")
COMP_CWORD=2
_retrydctl
for cmd in "${COMPREPLY[@]}"; do
    "$retrydctl" help "$cmd" >/dev/null </dev/null || {
        echo "FAIL: retrydctl help $cmd" >&2
        status=1
    }
done
[[ $status == 0 ]] && echo "completion: ok"
exit $status
