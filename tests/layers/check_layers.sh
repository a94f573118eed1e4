#!/bin/sh
# SPDX-License-Identifier: MIT
# The layer gate (docs/architecture.md, docs/gates.md): the arrows between
# libretryd's layers, checked on what the compiler produced and on the
# sources, so a forbidden call fails even where CMake would let it link.
#
# usage:
#   check_layers.sh check [--cc CC] [--src DIR] [--daemon BIN] [--sim BIN]
#                         [--layer NAME OBJ...]...
#     Every undefined symbol of a layer's objects must be defined by the
#     same layer, by a layer its arrows reach, or by a system library its
#     arrows reach (ARROWS below); the daemon's DT_NEEDED must not name
#     libcurl, libuuid or liburcu-bp, the simulator's (retryd-sim) no
#     libcurl, libuuid or liburcu; the #include lines under DIR keep the
#     rules of check_includes. Each part runs when its input is given.
#   check_layers.sh selftest [--cc CC] --work DIR [--layer NAME OBJ...]...
#     Proves the checker fails: feeds it an object that calls
#     curl_easy_init as if it were in decide, a decide source that includes
#     <curl/curl.h> and an executable linked with libcurl as the daemon,
#     each of which must fail, and a harmless object that must pass.
# Exit status: 0 clean, 1 an arrow is broken, 2 the check itself failed.
set -eu

# --- the arrows ------------------------------------------------------------
# layer: the layers and the libraries it may use. c is libc with
# libc_nonshared and the dynamic loader (and, since glibc 2.34, pthread);
# m is libm; gcc is the compiler's runtime (libgcc.a: __udivti3 and the
# like). The others are pkg-config packages' libraries.
arrows() {
    case $1 in
    base) echo "libs: c gcc" ;;
    decide) echo "base libs: c m gcc" ;;
    proto) echo "libs: c gcc protobuf-c" ;;
    shared) echo "base proto libs: c m gcc protobuf-c" ;;
    # decide: the pure engine's health admission and classification
    # (docs/health.md), which the host's upstream handles ask.
    budget) echo "decide shared base proto libs: c m gcc urcu-bp urcu-cds" ;;
    exec) echo "budget decide shared base libs: c m gcc curl uuid" ;;
    # The Prometheus renderer: the proto's types, the engine's names.
    prom) echo "decide base proto libs: c gcc" ;;
    # The storm simulator (sim/, docs/storms.md): the real engine and the
    # real bucket and health code, on a segment in memory; no attachment,
    # no executor, no libcurl.
    sim) echo "decide shared base libs: c m gcc" ;;
    # The daemon's wings (daemon/CMakeLists.txt), bottom up, then the
    # daemon proper (the event loop), which may use them all.
    dcore) echo "shared base proto prom libs: c m gcc protobuf-c urcu-memb urcu-cds inih" ;;
    dsegment) echo "dcore shared base proto libs: c m gcc protobuf-c urcu-memb urcu-cds" ;;
    dcontrol) echo "dsegment dcore shared base proto libs: c m gcc protobuf-c urcu-memb urcu-cds" ;;
    dstats) echo "dsegment dcore shared base proto prom libs: c m gcc protobuf-c urcu-memb urcu-cds microhttpd" ;;
    # The fleet tier (docs/fleet.md): its thread talks to Redis (hiredis).
    dfleet) echo "dsegment dcore shared base proto libs: c m gcc protobuf-c urcu-memb urcu-cds hiredis" ;;
    daemon) echo "dfleet dstats dcontrol dsegment dcore shared base proto prom libs: c m gcc protobuf-c urcu-memb urcu-cds inih microhttpd systemd hiredis" ;;
    # The library's test suites (tests/libclient/<layer>): their layer and
    # those below it, criterion, and (for the executors) the test servers'
    # client side, which uses libc alone.
    test_support) echo "libs: c gcc" ;;
    test_base) echo "base libs: c m gcc criterion" ;;
    test_decide) echo "decide base libs: c m gcc criterion" ;;
    test_shared) echo "shared base proto libs: c m gcc protobuf-c criterion" ;;
    test_budget) echo "budget decide shared base proto libs: c m gcc protobuf-c urcu-bp urcu-cds criterion" ;;
    test_exec) echo "exec budget decide shared base proto test_support libs: c m gcc protobuf-c urcu-bp urcu-cds curl uuid criterion" ;;
    test_sim) echo "sim decide shared base libs: c m gcc" ;;
    *) return 1 ;;
    esac
}

# denied LAYER: functions LAYER may not reference although its arrows reach
# the layer that defines them. The stats wing only reads: nothing that
# creates, changes or frees upstreams, process slots, the segment or the
# registry; of a slot's health (docs/health.md) it may sum the window and
# read the hold, never record, rotate, push, claim, clear or repair. The
# fleet wing (docs/fleet.md) is held to the same: what it learns reaches
# the segment only through the owner's fleet functions (owner_fleet_*).
denied() {
    case $1 in
    dstats | dfleet)
        echo "owner_open owner_close owner_heartbeat owner_police" \
            "owner_set_draining owner_upstream_alloc owner_upstream_set_params" \
            "owner_upstream_retire owner_process_alloc owner_process_release" \
            "registry_new registry_free registry_add registry_replace" \
            "registry_remove keeper_start daemon_register daemon_retire" \
            "daemon_apply_config daemon_adopt_upstreams daemon_watch_process" \
            "daemon_release_process" \
            "retryd__health_init retryd__health_add_slow retryd__health_reject" \
            "retryd__health_claim_probe retryd__health_push retryd__health_check" \
            "retryd__health_hold_spent"
        ;;
    esac
}

# pkg-config package of each library key.
PKGS="protobuf-c=libprotobuf-c curl=libcurl uuid=uuid urcu-bp=liburcu-bp
urcu-cds=liburcu-cds urcu-memb=liburcu-memb inih=inih microhttpd=libmicrohttpd systemd=libsystemd
hiredis=hiredis criterion=criterion"

# Defined by the static linker, not by any library.
LINKER_SYMBOLS="_GLOBAL_OFFSET_TABLE_ _DYNAMIC __dso_handle __ehdr_start"

# Runtimes of sanitizers and coverage, allowed in any layer: an
# instrumented build references them from every object.
RUNTIME_PREFIXES="__asan_ __ubsan_ __tsan_ __sanitizer_ __sancov_ __msan __gcov_ __llvm_profile_"

# The daemon's DT_NEEDED must not name these (it never performs a request
# and registers its own RCU threads).
DAEMON_FORBIDDEN_NEEDED="libcurl libuuid liburcu-bp"
# Nor the simulator's: it performs no request and attaches to no daemon.
SIM_FORBIDDEN_NEEDED="libcurl libuuid liburcu"

die() {
    echo "check_layers: $*" >&2
    exit 2
}

# may_use LAYER: its arrows in words.
may_use() {
    arrows "$1" | sed -e 's/^libs:/libraries/' -e 's/ libs:/, libraries/' \
        -e 's/^\([a-z]\)/layers \1/'
}

# --- system libraries as files ---------------------------------------------
# The files a linker script (libc.so, libm.so) names, or the file itself.
script_files() {
    if [ -f "$1" ] && ! head -c 4 "$1" | grep -q ELF; then
        sed 's/[()]/ /g' "$1" | tr ' ' '\n' | grep '^/'
    else
        echo "$1"
    fi
}

# lib_files KEY: the files that make up library KEY.
lib_files() {
    case $1 in
    c) script_files "$("$CC" -print-file-name=libc.so)" ;;
    m) script_files "$("$CC" -print-file-name=libm.so)" ;;
    gcc) "$CC" -print-libgcc-file-name ;;
    *)
        pkg=$(echo "$PKGS" | tr ' ' '\n' | sed -n "s/^$1=//p")
        [ -n "$pkg" ] || die "no package for library '$1'"
        libdir=$(pkg-config --variable=libdir "$pkg") ||
            die "pkg-config knows no $pkg"
        for l in $(pkg-config --libs-only-l "$pkg"); do
            f="$libdir/lib${l#-l}.so"
            [ -e "$f" ] || f=$("$CC" -print-file-name="lib${l#-l}.so")
            [ -e "$f" ] || die "no file for ${l} ($pkg)"
            echo "$f"
        done
        ;;
    esac
}

# defined FILE: the global symbols FILE defines, one a line, without
# symbol versions (malloc@@GLIBC_2.2.5 is malloc).
defined() {
    case $1 in
    *.so | *.so.*) dyn=-D ;;
    *) dyn= ;;
    esac
    # shellcheck disable=SC2086 # $dyn is empty or one flag
    nm $dyn -A -P --defined-only "$1" 2>/dev/null |
        awk '$3 ~ /^[A-TV-Zui]$/ { sub(/@.*/, "", $2); print $2 }'
}

# --- the symbol check ------------------------------------------------------
# Reads the layers in $LAYERS_FILE ("layer object" lines).
check_symbols() {
    defs=$TMP/defs
    # The libraries' symbols, read once per selftest (LAYERS_LIBDEFS names
    # the file they are kept in between its checks).
    libdefs=${LAYERS_LIBDEFS:-$TMP/libdefs}
    if [ ! -s "$libdefs" ]; then
        : >"$libdefs.new"
        for key in c m gcc $(echo "$PKGS" | tr ' ' '\n' | sed 's/=.*//'); do
            for f in $(lib_files "$key"); do
                [ -e "$f" ] || die "library $key: no file $f"
                defined "$f" | sed "s|\$| lib:$key|" >>"$libdefs.new"
            done
        done
        mv "$libdefs.new" "$libdefs"
    fi
    cp "$libdefs" "$defs"
    for s in $LINKER_SYMBOLS; do
        echo "$s linker" >>"$defs"
    done
    : >"$TMP/undef"
    while read -r layer obj; do
        [ -f "$obj" ] || die "layer $layer: no object $obj"
        defined "$obj" | sed "s|\$| layer:$layer|" >>"$defs"
        nm -A -P -u "$obj" | awk -v l="$layer" -v o="$obj" \
            '{ print l, o, $2 }' >>"$TMP/undef"
    done <"$LAYERS_FILE"

    : >"$TMP/allowed"
    # shellcheck disable=SC2013 # layer names are single words
    for layer in $(cut -d' ' -f1 "$LAYERS_FILE" | sort -u); do
        a=$(arrows "$layer") || die "unknown layer '$layer'"
        # shellcheck disable=SC2086 # the arrows, one word each
        set -- $a
        out="$layer layer:$layer linker"
        inlibs=0
        for w in "$@"; do
            if [ "$w" = "libs:" ]; then
                inlibs=1
            elif [ $inlibs = 1 ]; then
                out="$out lib:$w"
            else
                out="$out layer:$w"
            fi
        done
        echo "$out" >>"$TMP/allowed"
    done

    # One line per broken arrow: layer, object, symbol, where it is defined.
    awk -v prefixes="$RUNTIME_PREFIXES" '
        FILENAME == ARGV[1] { for (i = 2; i <= NF; i++) ok[$1, $i] = 1; next }
        FILENAME == ARGV[2] { where[$1] = where[$1] " " $2; next }
        {
            layer = $1; obj = $2; sym = $3
            n = split(prefixes, p, " ")
            for (i = 1; i <= n; i++)
                if (index(sym, p[i]) == 1) next
            m = split(where[sym], w, " ")
            for (i = 1; i <= m; i++)
                if ((layer, w[i]) in ok) next
            print layer, obj, sym, (m ? where[sym] : " nowhere")
        }' "$TMP/allowed" "$defs" "$TMP/undef" | sort -u >"$TMP/broken"

    # References the arrows allow but a deny list forbids.
    : >"$TMP/denied"
    # shellcheck disable=SC2013 # layer names are single words
    for layer in $(cut -d' ' -f1 "$LAYERS_FILE" | sort -u); do
        for sym in $(denied "$layer"); do
            echo "$layer $sym" >>"$TMP/denied"
        done
    done
    awk 'FILENAME == ARGV[1] { no[$1, $2] = 1; next }
         ($1, $3) in no { print $1, $2, $3 }' "$TMP/denied" "$TMP/undef" |
        sort -u >"$TMP/forbidden"

    while read -r layer obj sym; do
        case $obj in
        *.dir/*) short=${obj##*.dir/} ;;
        *) short=${obj##*/} ;;
        esac
        echo "layers: FAIL $layer: $short ($layer) references $sym, which" \
            "changes the segment or its tables; $layer only reads"
    done <"$TMP/forbidden"
    if [ ! -s "$TMP/broken" ] && [ ! -s "$TMP/forbidden" ]; then
        echo "layers: symbols: $(wc -l <"$LAYERS_FILE") objects of" \
            "$(cut -d' ' -f1 "$LAYERS_FILE" | sort -u | tr '\n' ' ')keep their arrows"
        return 0
    fi
    while read -r layer obj sym where; do
        if [ "$where" = nowhere ]; then
            to="?"
            by="defined by no layer given and no known library"
        else
            to=$(echo "$where" | tr ' ' '\n' | sed 's/^[a-z]*://' |
                sort -u | tr '\n' ' ' | sed 's/ $//')
            by="defined only by $to"
        fi
        case $obj in
        *.dir/*) short=${obj##*.dir/} ;; # CMake's objects: source path
        *) short=${obj##*/} ;;
        esac
        echo "layers: FAIL $layer -> $to: $short ($layer) references" \
            "$sym, $by; $layer may use $(may_use "$layer")"
    done <"$TMP/broken"
    return 1
}

# --- the daemon's and the simulator's DT_NEEDED ---------------------------
# check_needed BIN WHO FORBIDDEN: BIN (the daemon, the simulator) needs
# none of the libraries FORBIDDEN (a space-separated list).
check_needed() {
    needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p') ||
        die "readelf -d $1 failed"
    bad=0
    for lib in $needed; do
        for f in $3; do
            case $lib in
            "$f".so* | "$f"-*.so*)
                echo "layers: FAIL $2 -> ${f#lib}: $1 needs $lib" \
                    "(the $2 never links $3)"
                bad=1
                ;;
            esac
        done
    done
    [ $bad = 0 ] && echo "layers: needed: ${1##*/} needs none of $3"
    return $bad
}

# --- the sources' #include lines -------------------------------------------
# includes_rule WHAT REGEX FILE...: fails on each #include whose path
# matches the extended REGEX.
includes_rule() {
    what=$1
    re=$2
    shift 2
    [ $# -gt 0 ] || return 0
    awk -v re="$re" -v what="$what" '
        match($0, /^[ \t]*#[ \t]*include[ \t]*[<"][^>"]+[>"]/) {
            s = substr($0, RSTART, RLENGTH)
            sub(/^[^<"]*[<"]/, "", s); sub(/[>"]$/, "", s)
            if (s ~ re) {
                printf "layers: FAIL %s:%d: #include %s: %s\n",
                       FILENAME, FNR, s, what
                bad = 1
            }
        }
        END { exit bad }' "$@"
}

# files DIR [find options]: the C sources and headers under DIR.
files() {
    d=$1
    shift
    [ -d "$d" ] || return 0
    find "$d" "$@" -type f \( -name '*.c' -o -name '*.h' \) | sort
}

check_includes() {
    src=$1
    bad=0
    cd "$src" || die "no source dir $src"
    # shellcheck disable=SC2046 # one word per file
    includes_rule \
        "base and decide include no shared, budget, exec, curl, urcu or protobuf header" \
        '(^|/)(shared|budget|exec)/|^curl/|urcu|protobuf|\.pb-c\.h$' \
        $(files libclient/base) $(files libclient/decide) || bad=1
    # retryd/retryd.h includes decision.h and client.h.
    # shellcheck disable=SC2046
    includes_rule \
        "shared includes no decide, budget, exec, decision, client, curl or urcu header" \
        '(^|/)(decide|budget|exec)/|^retryd/(decision|client|retryd)\.h$|^curl/|urcu' \
        $(files libclient/shared) || bad=1
    # The simulator: the engine and the shared layer, never the budget
    # layer's attachment, the executor, curl or urcu.
    # shellcheck disable=SC2046
    includes_rule \
        "the simulator includes no budget, exec, client, budget API, curl or urcu header" \
        '(^|/)(budget|exec)/|^retryd/(client|budget|budget_decide|multi|retryd)\.h$|^curl/|urcu' \
        $(files sim) || bad=1
    # The daemon (retrydctl, a client of the library, lives apart).
    # shellcheck disable=SC2046
    includes_rule \
        "the daemon includes no exec, budget, curl, urcu-bp or decision header" \
        '(^|/)(exec|budget)/|^curl/|urcu-bp|^retryd/(decision|retryd)\.h$' \
        $(files daemon) || bad=1
    # Its wings: each includes only the wings below it (daemon.h, the
    # state they share, is types only).
    # shellcheck disable=SC2046
    includes_rule "the daemon's core includes no wing's header" \
        '^(segment|control|stats|fleet)/|^daemon\.h$' $(files daemon/core) || bad=1
    # shellcheck disable=SC2046
    includes_rule "the segment wing includes no control, stats or fleet header" \
        '^(control|stats|fleet)/' $(files daemon/segment) || bad=1
    # shellcheck disable=SC2046
    includes_rule "the control wing includes no stats or fleet header" \
        '^(stats|fleet)/' $(files daemon/control) || bad=1
    # shellcheck disable=SC2046
    includes_rule "the stats wing includes no control or fleet header" \
        '^(control|fleet)/' $(files daemon/stats) || bad=1
    # shellcheck disable=SC2046
    includes_rule "the fleet wing includes no control or stats header" \
        '^(control|stats)/' $(files daemon/fleet) || bad=1
    cd - >/dev/null
    [ $bad = 0 ] && echo "layers: includes: base, decide, shared, the daemon" \
        "and its wings, the simulator include only what their arrows allow"
    return $bad
}

# --- arguments -------------------------------------------------------------
CC=${CC:-cc}
SRC=
DAEMON=
SIM=
WORK=
mode=${1:-}
[ $# -gt 0 ] && shift
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LAYERS_FILE=$TMP/layers
: >"$LAYERS_FILE"
layer=
while [ $# -gt 0 ]; do
    case $1 in
    --cc) CC=$2; shift 2 ;;
    --src) SRC=$2; shift 2 ;;
    --daemon) DAEMON=$2; shift 2 ;;
    --sim) SIM=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --layer) layer=$2; shift 2 ;;
    --*) die "unknown option $1" ;;
    *)
        [ -n "$layer" ] || die "object $1 before any --layer"
        echo "$layer $1" >>"$LAYERS_FILE"
        shift
        ;;
    esac
done

run_check() {
    rc=0
    if [ -s "$LAYERS_FILE" ]; then check_symbols || rc=1; fi
    if [ -n "$DAEMON" ]; then
        check_needed "$DAEMON" daemon "$DAEMON_FORBIDDEN_NEEDED" || rc=1
    fi
    if [ -n "$SIM" ]; then
        check_needed "$SIM" simulator "$SIM_FORBIDDEN_NEEDED" || rc=1
    fi
    if [ -n "$SRC" ]; then check_includes "$SRC" || rc=1; fi
    return $rc
}

# expect WANT NAME TEXT CMD...: runs CMD (this script), which must exit
# WANT and, when TEXT is not empty, print TEXT.
expect() {
    want=$1 name=$2 text=$3
    shift 3
    got=0
    "$@" >"$TMP/out" 2>&1 || got=$?
    if [ "$got" != "$want" ] ||
        { [ -n "$text" ] && ! grep -qF -- "$text" "$TMP/out"; }; then
        # shellcheck disable=SC2016 # the quotes are text
        echo "layers selftest: FAIL $name: exit $got, wanted $want" \
            "${text:+and '$text'}; output:"
        sed 's/^/    /' "$TMP/out"
        return 1
    fi
    echo "layers selftest: ok   $name"
    sed 's/^/    /' "$TMP/out"
}

selftest() {
    [ -n "$WORK" ] || die "selftest needs --work DIR"
    rm -rf "$WORK"
    mkdir -p "$WORK/src/libclient/decide" "$WORK/src/daemon" "$WORK/src/sim"
    self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    # The layers given (the real base and decide, say) stay as they are;
    # the two objects join decide.
    set --
    while read -r l o; do set -- "$@" --layer "$l" "$o"; done <"$LAYERS_FILE"

    printf '#include <string.h>\nsize_t layers_good(const char *s);\n%s\n' \
        'size_t layers_good(const char *s) { return strlen(s); }' \
        >"$WORK/good.c"
    printf 'void *curl_easy_init(void);\nvoid *layers_bad(void);\n%s\n' \
        'void *layers_bad(void) { return curl_easy_init(); }' >"$WORK/bad.c"
    "$CC" -c -fPIC -o "$WORK/good.o" "$WORK/good.c" || die "cannot compile"
    "$CC" -c -fPIC -o "$WORK/bad.o" "$WORK/bad.c" || die "cannot compile"
    printf '#include <curl/curl.h>\n' >"$WORK/src/libclient/decide/bad.c"
    printf '#include "retryd/decision.h"\n' >"$WORK/src/daemon/bad.h"
    printf '#include "retryd/client.h"\n' >"$WORK/src/sim/bad.c"
    printf 'int main(void) { return 0; }\n' >"$WORK/main.c"
    # shellcheck disable=SC2046 # pkg-config's flags, one word each
    "$CC" -o "$WORK/needs_curl" "$WORK/main.c" -Wl,--no-as-needed \
        $(pkg-config --libs libcurl) || die "cannot link with libcurl"

    LAYERS_LIBDEFS=$WORK/libdefs
    export LAYERS_LIBDEFS
    rc=0
    expect 0 "a decide object that calls strlen passes" "keep their arrows" \
        "$self" check --cc "$CC" "$@" --layer decide "$WORK/good.o" || rc=1
    expect 1 "a decide object that calls curl_easy_init fails" \
        "FAIL decide -> curl: bad.o (decide) references curl_easy_init" \
        "$self" check --cc "$CC" "$@" --layer decide "$WORK/bad.o" || rc=1
    expect 1 "a decide source that includes <curl/curl.h> fails" \
        "libclient/decide/bad.c:1: #include curl/curl.h" \
        "$self" check --src "$WORK/src" || rc=1
    expect 1 "a daemon header that includes retryd/decision.h fails" \
        "daemon/bad.h:1: #include retryd/decision.h" \
        "$self" check --src "$WORK/src" || rc=1
    expect 1 "a daemon that needs libcurl fails" "FAIL daemon -> curl" \
        "$self" check --daemon "$WORK/needs_curl" || rc=1
    # The simulator: a sim object that calls libcurl, a sim source that
    # includes the executor's header, a simulator linked with libcurl.
    expect 1 "a sim object that calls curl_easy_init fails" \
        "FAIL sim -> curl: bad.o (sim) references curl_easy_init" \
        "$self" check --cc "$CC" "$@" --layer sim "$WORK/bad.o" || rc=1
    expect 1 "a sim source that includes retryd/client.h fails" \
        "sim/bad.c:1: #include retryd/client.h" \
        "$self" check --src "$WORK/src" || rc=1
    expect 1 "a simulator that needs libcurl fails" "FAIL simulator -> curl" \
        "$self" check --sim "$WORK/needs_curl" || rc=1

    # The daemon's wings: a segment function, a stats object that calls
    # it (its arrows reach the segment, its deny list forbids the call), a
    # segment object that calls up into the control wing.
    printf 'void owner_upstream_retire(void *o, unsigned s);\n%s\n' \
        'void owner_upstream_retire(void *o, unsigned s) { (void)o; (void)s; }' \
        >"$WORK/seg.c"
    printf 'void owner_upstream_retire(void *o, unsigned s);\n%s\n%s\n' \
        'void stats_bad(void);' \
        'void stats_bad(void) { owner_upstream_retire(0, 0); }' >"$WORK/stats_bad.c"
    printf 'int control_accept(void *d);\nint seg_bad(void);\n%s\n' \
        'int seg_bad(void) { return control_accept(0); }' >"$WORK/seg_bad.c"
    printf 'int control_accept(void *d);\n%s\n' \
        'int control_accept(void *d) { (void)d; return 0; }' >"$WORK/ctl.c"
    for o in seg stats_bad seg_bad ctl; do
        "$CC" -c -fPIC -o "$WORK/$o.o" "$WORK/$o.c" || die "cannot compile"
    done
    expect 1 "a stats object that retires an upstream fails" \
        "FAIL dstats: stats_bad.o (dstats) references owner_upstream_retire" \
        "$self" check --cc "$CC" --layer dsegment "$WORK/seg.o" \
        --layer dstats "$WORK/stats_bad.o" || rc=1
    expect 1 "a fleet object that retires an upstream fails" \
        "FAIL dfleet: stats_bad.o (dfleet) references owner_upstream_retire" \
        "$self" check --cc "$CC" --layer dsegment "$WORK/seg.o" \
        --layer dfleet "$WORK/stats_bad.o" || rc=1
    expect 1 "a segment object that calls the control wing fails" \
        "FAIL dsegment -> dcontrol: seg_bad.o (dsegment) references control_accept" \
        "$self" check --cc "$CC" --layer dcontrol "$WORK/ctl.o" \
        --layer dsegment "$WORK/seg_bad.o" || rc=1
    printf 'int retryd__bucket_take(void *b);\nint suite_bad(void);\n%s\n' \
        'int suite_bad(void) { return retryd__bucket_take(0); }' >"$WORK/suite_bad.c"
    printf 'int retryd__bucket_take(void *b);\n%s\n' \
        'int retryd__bucket_take(void *b) { (void)b; return 0; }' >"$WORK/bucket.c"
    for o in suite_bad bucket; do
        "$CC" -c -fPIC -o "$WORK/$o.o" "$WORK/$o.c" || die "cannot compile"
    done
    expect 1 "a decide test suite that calls the shared layer fails" \
        "FAIL test_decide -> shared: suite_bad.o (test_decide) references retryd__bucket_take" \
        "$self" check --cc "$CC" --layer shared "$WORK/bucket.o" \
        --layer test_decide "$WORK/suite_bad.o" || rc=1
    expect 0 "a control object that calls the segment passes" "keep their arrows" \
        "$self" check --cc "$CC" --layer dsegment "$WORK/seg.o" \
        --layer dcontrol "$WORK/ctl.o" || rc=1
    return $rc
}

case $mode in
check) run_check ;;
selftest) selftest ;;
*) die "usage: check_layers.sh check|selftest [options] (see the head of this file)" ;;
esac
