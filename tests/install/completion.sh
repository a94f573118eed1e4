#!/bin/bash
# SPDX-License-Identifier: MIT
# The bash completion of retrydctl, driven the way bash drives it
# (COMP_WORDS, COMP_CWORD, then the function): commands, each command's
# options, and option values; and every option it offers for `decide` and
# `request` is one retrydctl accepts.
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
expect "retrydctl st" "stats"
expect "retrydctl " "decide request stats upstreams drain retire --help"
expect "retrydctl stats --p" "--prometheus --processes"
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
[[ $status == 0 ]] && echo "completion: ok"
exit $status
