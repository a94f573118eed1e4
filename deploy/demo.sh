#!/bin/sh
# The main job on an embedded default: builds retryd, then walks through the
# decisions a payments service meets, each made by the real engine through
# retrydctl. (Once the daemon lands this becomes the shared-budget demo.)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RETRYD_BUILD_DIR:-"$root/build"}
"$root/deploy/build.sh" "$build" >&2
ctl="$build/daemon/retrydctl"

scene() {
    printf '\n### %s\n$ retrydctl decide' "$1"
    shift
    printf ' %s' "$@"
    printf '\n'
    "$ctl" decide --seed 1 "$@"
}

scene "A payment POST timed out after the request was written" \
    --evidence sent_no_response --failure timeout --idempotency non_idempotent
scene "The same payment, sent with an Idempotency-Key" \
    --evidence sent_no_response --failure timeout --idempotency idempotent_by_key
scene "The payment could not even connect: proven never sent" \
    --evidence not_sent --failure connect --idempotency non_idempotent
scene "A 503 from the gateway on a read" \
    --evidence response_received --status 503 --idempotency safe
scene "A 503 from the gateway on a payment" \
    --evidence response_received --status 503 --idempotency non_idempotent
scene "429 with Retry-After: 2" \
    --evidence response_received --status 429 --retry-after 2 --idempotency safe
scene "429 asking for more time than the deadline leaves" \
    --evidence response_received --status 429 --retry-after 30 --remaining 5s
scene "The host's retry budget for this upstream is empty" \
    --evidence response_received --status 503 --idempotency safe --budget 0
scene "401 on an idempotent call: refresh credentials once, then replay" \
    --evidence response_received --status 401 --idempotency idempotent
scene "The body was a one-shot stream" \
    --evidence not_sent --failure connect --replayability one_shot
scene "The certificate was rejected" \
    --evidence not_sent --failure tls_certificate --idempotency safe
