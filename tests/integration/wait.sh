# wait_for FILE PATTERN PID [SECONDS]: returns once FILE holds PATTERN. Exits the test with FILE's
# text if process PID ends first or SECONDS (default 30) pass: an ASan binary on a loaded 2-core CI
# machine can take several seconds to start. (Sourced, not run.)
wait_for() {
  local file=$1 pattern=$2 pid=$3 limit=${4:-30} i
  for ((i = 0; i < limit * 20; i++)); do
    grep -qs -- "$pattern" "$file" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -qs -- "$pattern" "$file" && return 0
  cat "$file" >&2 2>/dev/null || true
  local why="exited"
  kill -0 "$pid" 2>/dev/null && why="still running after $limit s"
  echo "FAIL: '$pattern' never appeared in $file (process $why)" >&2
  exit 1
}
