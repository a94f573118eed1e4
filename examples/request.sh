#!/bin/sh
# SPDX-License-Identifier: MIT
# request.sh: a payment from a shell, through `retrydctl request`, with
# each of its three answers handled and an ambiguous one reconciled.
#
# usage: request.sh PAY_URL LOOKUP_URL [AMOUNT]
#   PAY_URL     where the payment is POSTed. It is non-idempotent (the
#               default of retrydctl request): retryd never sends it again
#               once it may have executed.
#   LOOKUP_URL  where the upstream says whether it has the payment: 2xx it
#               has (it went through), 404 it has not.
# exit: 0 paid, 1 not paid (and nothing ran twice), 2 unknown (a human
#       must reconcile), 64 usage, 70 retrydctl could not run.
#
# retrydctl request answers like curl, and its exit code tells the three
# outcomes apart: 0 a response (with -f, 22 when its status is >= 400),
# 2 ambiguous (the request may have executed), and for a failure (nothing
# that must not run twice ran) curl's code for what failed: 6 no such
# host, 7 refused, 28 timed out, 35 TLS, 56 connection lost, 60
# certificate, 47 too many redirects, 1 anything else; 75 throttled,
# not sent at all: the host's health kept it back (retrydctl(1)). RETRYDCTL names the binary (default:
# retrydctl on the PATH); the budget is the host's when a retryd daemon
# answers on $RETRYD_CONTROL_SOCKET, as for every retryd client.
#
# If the upstream honours an Idempotency-Key, prefer
#   retrydctl request --idempotency-key=ORDER-ID -d ... PAY_URL
# retrydctl then replays the payment itself with the same key when an
# attempt is lost, and never answers ambiguous. This script shows the
# case without one: an ambiguous answer is settled by asking the upstream.
set -u

RETRYDCTL=${RETRYDCTL:-retrydctl}

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: request.sh PAY_URL LOOKUP_URL [AMOUNT]" >&2
    exit 64
fi
pay_url=$1
lookup_url=$2
amount=${3:-10}

say() {
    echo "request.sh: $*" >&2
}

# POST the payment; its response body goes to stdout. --non-idempotent is
# the default, said out loud: the method never decides. -f: a status >= 400
# is exit 22 (the upstream refused it); -s -S: no summary line, errors
# still on stderr. Returns retrydctl's exit code.
pay() {
    "$RETRYDCTL" request --non-idempotent -s -S -f -d "amount=$amount" \
        "$pay_url"
}

# Ask the upstream whether it has the payment: prints found, absent or
# unknown. The lookup is a read (--safe), which retryd retries by itself
# when it fails; -i puts the status line first, which is where the status
# is read from.
lookup() {
    if ! out=$("$RETRYDCTL" request -s -S -i --safe "$lookup_url"); then
        echo unknown # no answer: a failure, or ambiguous (for a read!)
        return
    fi
    status=$(printf '%s\n' "$out" |
        sed -n '1s/^HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p')
    case $status in
    2??) echo found ;;
    404) echo absent ;;
    *) echo unknown ;; # a 5xx says nothing about the payment
    esac
}

# What an exit code of pay() means, for the first try or the second: it
# exits the script, except for an ambiguous answer, where it returns and
# the caller decides what follows.
settle() {
    case $1 in
    0)
        say "paid"
        exit 0
        ;;
    22)
        say "refused by the upstream (status >= 400): not paid"
        exit 1
        ;;
    1 | 3 | 6 | 7 | 28 | 35 | 47 | 56 | 60)
        say "failed without executing: not paid; safe to try again later"
        exit 1
        ;;
    75)
        say "not sent: the host throttle or a pushback held it back; not paid, try again later"
        exit 1
        ;;
    2) return 2 ;;
    *)
        say "retrydctl request could not run (exit $1)"
        exit 70
        ;;
    esac
}

pay
settle $?

# Ambiguous: the payment may or may not have gone through, and sending it
# again blindly could pay twice. Ask the upstream.
say "ambiguous: the payment may have executed; asking the upstream"
case $(lookup) in
found)
    say "the upstream has it: paid, not sent again"
    exit 0
    ;;
absent)
    # The ambiguous attempt did not execute, so one more is no duplicate.
    # (An upstream that records payments asynchronously may not show one
    # yet: it must be asked after its processing time, or given a key.)
    say "the upstream does not have it: sending it once more"
    pay
    settle $?
    say "ambiguous again: reconcile by hand"
    exit 2
    ;;
*)
    say "the upstream cannot tell: reconcile by hand"
    exit 2
    ;;
esac
