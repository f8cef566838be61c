#!/usr/bin/env bash
# (f) `down` leaves no namespace and no state behind; bad input gets a clear error and exit != 0.
PREFIX=mrctf
source "$(dirname "$0")/lib.sh"
"$TB" up --hosts 2 --planes 2 --spines 1 --mode ecmp
"$TB" up --hosts 2 --planes 2 --spines 1 --mode ecmp | grep -q "already up" || fail "second up is not idempotent"
"$TB" fault drop p1l1 h1 5
n=$(ip netns list | grep -c "^$PREFIX-" || true)
(( n == 2 + 2 * (1 + 1) + 2 * 1 )) || fail "expected 8 namespaces, found $n"   # hosts + planes*(leaves+spines)
"$TB" down
left=$(ip netns list | grep "^$PREFIX-" || true)
[[ -z $left ]] || fail "namespaces left after down: $left"
[[ ! -e /run/mrc-testbed/$PREFIX.env ]] || fail "state file left after down"
"$TB" down >/dev/null || fail "down twice must succeed"
expect_err() { # description pattern cmd...
  local what=$1 pat=$2; shift 2
  local out rc=0; out=$("$@" 2>&1) || rc=$?
  (( rc != 0 )) || fail "$what: exit 0"
  grep -qi -- "$pat" <<<"$out" || fail "$what: message '$out' lacks '$pat'"
  echo "ok: $what -> rc=$rc: $(head -1 <<<"$out")"
}
expect_err "unknown command" "unknown command" "$TB" frobnicate
expect_err "bad --hosts" "--hosts must be a whole number" "$TB" up --hosts two --planes 2 --spines 1 --mode ecmp
expect_err "zero --spines" "--spines must be between" "$TB" up --hosts 2 --planes 2 --spines 0 --mode ecmp
expect_err "bad --mode" "--mode must be" "$TB" up --hosts 2 --planes 2 --spines 1 --mode mesh
expect_err "bad --mtu" "--mtu must be between" "$TB" up --hosts 2 --planes 2 --spines 1 --mode ecmp --mtu 99999
expect_err "show when down" "is not up" "$TB" show
"$TB" up --hosts 2 --planes 1 --spines 1 --mode ecmp >/dev/null
expect_err "bad percent" "PERCENT must be" "$TB" fault drop p1l1 h1 ten
expect_err "percent > 100" "at most 100" "$TB" fault drop p1l1 h1 150
expect_err "unknown node" "unknown node" "$TB" fault link-down p9s9 l1
expect_err "unknown iface" "has no interface" "$TB" fault link-down p1s1 eth7
expect_err "bad rate" "RATE must" "$TB" fault rate p1s1 l1 fast
expect_err "unknown fault" "unknown fault" "$TB" fault melt p1s1 l1
"$TB" fault rate p1s1 l2 100mbit >/dev/null || fail "fault rate"
tc -n "$PREFIX-p1s1" qdisc show dev l2 | grep -q "tbf.*rate 100Mbit" || fail "tbf not installed"
"$TB" fault clear >/dev/null || fail "fault clear (all)"
tc -n "$PREFIX-p1s1" qdisc show dev l2 | grep -q tbf && fail "tbf still there after clear"
"$TB" down >/dev/null
[[ -z $(ip netns list | grep "^$PREFIX-" || true) ]] || fail "namespaces left after the second down"
echo PASS
