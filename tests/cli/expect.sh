#!/usr/bin/env bash
# expect.sh EXIT REGEX [--not REGEX] -- COMMAND ARGS...
# Runs COMMAND with no standard input and checks that it exits with EXIT and that its combined
# stdout+stderr matches the extended regular expression REGEX (and not the --not one). Prints what
# the command printed, so a failure shows the message it gave.
set -u
want_rc=$1 want_re=$2; shift 2
not_re=""
if [ "${1:-}" = "--not" ]; then not_re=$2; shift 2; fi
[ "${1:-}" = "--" ] && shift
out=$("$@" </dev/null 2>&1); rc=$?
printf '%s\n' "$out"
echo "-- exit $rc (want $want_rc)"
[ "$rc" -eq "$want_rc" ] || { echo "FAIL: exit code $rc, expected $want_rc"; exit 1; }
printf '%s\n' "$out" | grep -Eq -- "$want_re" || { echo "FAIL: output does not match /$want_re/"; exit 1; }
if [ -n "$not_re" ] && printf '%s\n' "$out" | grep -Eq -- "$not_re"; then
  echo "FAIL: output matches /$not_re/"; exit 1
fi
exit 0
