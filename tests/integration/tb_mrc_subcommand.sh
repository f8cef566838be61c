#!/usr/bin/env bash
# `mrc testbed` is the same command as tools/testbed/mrc-testbed: arguments, output and exit codes
# pass through (a fabric goes up, is shown, and comes down; a bad command fails).
set -euo pipefail
MRC=$1
P=mrcsub
trap '"$MRC" testbed down --prefix $P >/dev/null 2>&1 || true' EXIT
[[ $(id -u) -eq 0 ]] || { echo "FAIL: this test needs root (run the tests as root on Linux)"; exit 1; }
"$MRC" testbed up --hosts 2 --planes 2 --spines 1 --mode ecmp --prefix $P
shown=$("$MRC" testbed show --json --prefix $P)
grep -q "10.1.1.1" <<<"$shown" || { echo "FAIL: show does not list host 1's plane-1 address: $shown"; exit 1; }
ip netns list | grep -q "^$P-h1" || { echo "FAIL: namespace $P-h1 missing after up"; exit 1; }
if "$MRC" testbed no-such-command 2>/dev/null; then echo "FAIL: a bad command succeeded"; exit 1; fi
"$MRC" testbed down --prefix $P
if ip netns list | grep -q "^$P-"; then echo "FAIL: namespaces left after down"; exit 1; fi
echo "PASS"
