#!/bin/sh
# SPDX-License-Identifier: MIT
# One manual page per public function, made from the public headers at
# build time: the declaration (every RETRYD_EXPORT function of
# include/retryd/*.h) and the comment above it, which is where each
# function is documented. libretryd(3) is the overview; these are its
# pages per function (man 3 retryd_decide).
# usage: deploy/man-from-headers.sh <include/retryd> <out-dir> <version> <date>
set -eu
src=$1
out=$2
version=$3
date=$4
mkdir -p "$out"
rm -f "$out"/retryd_*.3
for h in "$src"/*.h; do
    header=${h##*/}
    awk -v header="$header" -v out="$out" -v version="$version" \
        -v date="$date" '
    # roff: a backslash is \e; a line that starts with a dot or a quote is
    # text, not a request.
    function esc(s) {
        gsub(/\\/, "\\e", s)
        if (s ~ /^[.\047]/)
            s = "\\&" s
        return s
    }
    # @p NAME (a parameter named in the text) in italics.
    function params(s,    r) {
        r = ""
        while (match(s, /@p [A-Za-z_][A-Za-z_0-9]*/)) {
            r = r substr(s, 1, RSTART - 1) "\\fI" substr(s, RSTART + 3, RLENGTH - 3) "\\fP"
            s = substr(s, RSTART + RLENGTH)
        }
        return r s
    }
    function flush_comment() { ncomment = 0 }
    function emit(decl,    name, f, i, line, first, n, m, sect) {
        if (decl !~ /\(/)
            return # a variable, not a function
        name = decl
        sub(/\(.*/, "", name)
        sub(/.*[ *]/, "", name)
        f = out "/" name ".3"
        print ".\\\" Generated from include/retryd/" header \
            " by deploy/man-from-headers.sh: edit the header, not this page." > f
        print ".TH " toupper(name) " 3 " date " \"retryd " version "\" \"Library Functions Manual\"" > f
        # The first sentence of the comment names the function.
        first = ""
        for (i = 1; i <= ncomment; i++)
            if (comment[i] != "" && comment[i] !~ /^@/) { first = comment[i]; break }
        sub(/\. .*/, "", first)
        sub(/\.$/, "", first)
        if (first == "")
            first = "see libretryd(3)"
        print ".SH NAME" > f
        print name " \\- " esc(params(first)) > f
        print ".SH LIBRARY" > f
        print ".BR libretryd " "\" (\" \\-lretryd )" > f
        print ".SH SYNOPSIS" > f
        print ".nf" > f
        print ".B #include <retryd/" header ">" > f
        print ".PP" > f
        gsub(/RETRYD_EXPORT /, "", decl)
        gsub(/[ \t]+/, " ", decl)
        gsub(/\( /, "(", decl)
        print esc(decl) > f
        print ".fi" > f
        print ".SH DESCRIPTION" > f
        if (ncomment == 0)
            print "See " header " and libretryd(3)." > f
        sect = "text"
        for (i = 1; i <= ncomment; i++) {
            line = comment[i]
            if (line == "") {
                if (sect == "text") print ".PP" > f
                continue
            }
            if (line ~ /^@param /) {
                n = line
                sub(/^@param +/, "", n)
                m = n
                sub(/ .*/, "", m)
                sub(/^[^ ]* */, "", n)
                print ".TP" > f
                print ".I " esc(m) > f
                print esc(params(n)) > f
                sect = "param"
                continue
            }
            if (line ~ /^@return/) {
                sub(/^@return +/, "", line)
                print ".SH RETURN VALUE" > f
                print esc(params(line)) > f
                sect = "return"
                continue
            }
            print esc(params(line)) > f
        }
        print ".SH SEE ALSO" > f
        print ".BR libretryd (3)" > f
        close(f)
    }
    # Comments: the last one before a declaration documents it.
    incomment {
        line = $0
        done = sub(/\*\/.*/, "", line)
        sub(/^[ \t]*\* ?/, "", line)
        sub(/^[ \t]+/, "", line)
        sub(/[ \t]+$/, "", line)
        if (line != "" || ncomment > 0)
            comment[++ncomment] = line
        if (done) incomment = 0
        next
    }
    /^[ \t]*\/\*/ {
        flush_comment()
        afterdecl = 0
        line = $0
        sub(/^[ \t]*\/\*\*?/, "", line)
        done = sub(/\*\/.*/, "", line)
        sub(/^[ \t]+/, "", line)
        sub(/[ \t]+$/, "", line)
        if (line != "")
            comment[++ncomment] = line
        incomment = !done
        next
    }
    # Declarations that follow one another share the comment above the
    # first (the name functions of decision.h, say); a blank line after a
    # declaration, or anything else, ends it.
    indecl {
        decl = decl " " $0
        if ($0 ~ /;/) { indecl = 0; emit(decl); afterdecl = 1 }
        next
    }
    /^RETRYD_EXPORT / {
        decl = $0
        if ($0 ~ /;/) { emit(decl); afterdecl = 1 } else indecl = 1
        next
    }
    /^[ \t]*$/ { if (afterdecl) flush_comment(); afterdecl = 0; next }
    /^#/ { next }
    { flush_comment(); afterdecl = 0 }
    ' "$h"
done
n=$(find "$out" -name 'retryd_*.3' | wc -l)
[ "$n" -gt 0 ] || { echo "man-from-headers: no page made from $src" >&2; exit 1; }
