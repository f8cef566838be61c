#!/usr/bin/env bash
# Checks tools/wireshark/mrc.lua against a capture made by the real codec (mrc_gen_capture).
#   check_dissector.sh GEN_CAPTURE MRC_LUA OUT_DIR [TSHARK]
# 1. With the script: every mrc.* field (and IP/UDP checksum status, timestamps) of every frame equals what
#    the generator encoded (EXPECTED_MRC.tsv). Plain RoCEv2 frames are still decoded by the built-in dissector.
# 2. Without the script: the built-in RoCEv2 dissector decodes the BTH of every frame (EXPECTED_IB.tsv).
# 3. The Lua script loads without errors or warnings, and the capture has no malformed frames.
set -euo pipefail

gen=${1:?usage: check_dissector.sh GEN_CAPTURE MRC_LUA OUT_DIR [TSHARK]}
lua=${2:?missing MRC_LUA}
out=${3:?missing OUT_DIR}
tshark=${4:-tshark}

command -v "$tshark" >/dev/null || { echo "FAIL: tshark not found ($tshark)"; exit 1; }
[[ -f $lua ]] || { echo "FAIL: no Lua script at $lua"; exit 1; }
mkdir -p "$out"
# tshark wants a writable HOME for its profile; keep the test away from the user's one.
export HOME="$out/home"
mkdir -p "$HOME"

"$gen" "$out/capture.pcap" "$out/expected_mrc.tsv" "$out/expected_ib.tsv"

fail=0
# compare EXPECTED ACTUAL NAME: report every differing cell as frame/field/expected/actual.
compare() {
  local expected=$1 actual=$2 name=$3
  local n_exp n_act
  n_exp=$(($(wc -l <"$expected") - 1))
  n_act=$(wc -l <"$actual")
  if [[ $n_exp -ne $n_act ]]; then
    echo "FAIL [$name]: expected $n_exp frames, tshark printed $n_act"
    fail=1
  fi
  local bad
  bad=$(awk -F'\t' -v name="$name" '
    NR == FNR { if (FNR == 1) { for (i = 1; i <= NF; i++) col[i] = $i; ncol = NF } else want[FNR - 1] = $0; next }
    {
      split(want[FNR], e, "\t")
      for (i = 1; i <= ncol; i++) {
        if (e[i] != $i) { printf "FAIL [%s] frame %d %s: expected \"%s\", got \"%s\"\n", name, FNR, col[i], e[i], $i; bad++ }
        else checked++
      }
    }
    END { printf "[%s] %d field values matched\n", name, checked; exit bad > 0 }' "$expected" "$actual") || fail=1
  echo "$bad"
}

# --- 1. with the MRC dissector --------------------------------------------------------------------
mapfile -t cols < <(head -1 "$out/expected_mrc.tsv" | tr '\t' '\n')
args=()
for c in "${cols[@]}"; do args+=(-e "$c"); done
"$tshark" -n -r "$out/capture.pcap" -X "lua_script:$lua" -o ip.check_checksum:TRUE -o udp.check_checksum:TRUE \
  -T fields -E occurrence=a "${args[@]}" >"$out/actual_mrc.tsv" 2>"$out/tshark_mrc.err"
if grep -v 'Running as user "root"' "$out/tshark_mrc.err" | grep -q .; then
  echo "FAIL: tshark printed errors with the script:"; cat "$out/tshark_mrc.err"; fail=1
fi
compare "$out/expected_mrc.tsv" "$out/actual_mrc.tsv" "mrc.lua"

# Named values: the NACK reason, opcode and SACK mode names show up in the verbose tree and Info column.
"$tshark" -n -r "$out/capture.pcap" -X "lua_script:$lua" -V >"$out/verbose_mrc.txt" 2>/dev/null
for needle in 'Reason: TRIMMED (0x01)' 'Reason: UNEXP_EVENT (0x19)' 'Opcode: WRITE_ONLY_IMM (0xcb)' \
  'Opcode: SACK (0xdc)' 'Opcode: EP_RESPONSE (0xd9)' 'm (EV action): SKIP_ONCE (1)' \
  'Received PSNs (bitmap): 16777207,16777209,16777215,54' 'Syndrome: NAK_REMOTE_ACCESS_ERROR (0x62)' \
  'Operation: EV_PROBE (1)' 'Expert Info (Error/Checksum): ICRC mismatch, computed 0x' 'Trimmed packet: header stack only' \
  'RDMA WRITE Only (10)'; do
  if ! grep -qF -- "$needle" "$out/verbose_mrc.txt"; then echo "FAIL: '$needle' not in tshark -V output"; fail=1; fi
done
# Display filters on the new fields work.
n=$("$tshark" -n -r "$out/capture.pcap" -X "lua_script:$lua" -Y 'mrc.nack.reason == 0x01' 2>/dev/null | wc -l)
[[ $n -eq 2 ]] || { echo "FAIL: filter mrc.nack.reason == 0x01 matched $n frames, expected 2"; fail=1; }
n=$("$tshark" -n -r "$out/capture.pcap" -X "lua_script:$lua" -Y 'mrc && !mrc.icrc.good' 2>/dev/null | wc -l)
[[ $n -eq 1 ]] || { echo "FAIL: filter for bad ICRCs matched $n frames, expected 1"; fail=1; }
# No frame may be malformed (a Lua error in the dissector shows up as a malformed/Lua-error item).
n=$("$tshark" -n -r "$out/capture.pcap" -X "lua_script:$lua" -Y '_ws.malformed || _ws.lua' 2>/dev/null | wc -l)
[[ $n -eq 0 ]] || { echo "FAIL: $n malformed frames with the script"; fail=1; }

# --- 2. without the script: built-in RoCEv2 dissector ----------------------------------------------
mapfile -t cols < <(head -1 "$out/expected_ib.tsv" | tr '\t' '\n')
args=()
for c in "${cols[@]}"; do args+=(-e "$c"); done
"$tshark" -n -r "$out/capture.pcap" -T fields -E occurrence=a "${args[@]}" >"$out/actual_ib.tsv" 2>/dev/null
compare "$out/expected_ib.tsv" "$out/actual_ib.tsv" "built-in"

if [[ $fail -ne 0 ]]; then
  echo "check_dissector: FAILED (outputs in $out)"
  exit 1
fi
echo "check_dissector: OK"
