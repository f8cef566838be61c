# Sourced by bench/sim_speed.sh and tools/pgo_train.sh: the `mrc sim` scenario of htsim's default
# UEC network (docs/htsim.md §2) on a k-ary fat tree, MRC over 128 EVs with NSCC.
#   htsim_scenario FILE NAME K WORKLOAD-LINE...   (the lines of its [workload] table)
htsim_scenario() {
  local file=$1 name=$2 k=$3
  shift 3
  {
    cat <<TOML
name = "$name"
limit_us = 100000
[topology]
kind = "fattree"
k = $k
[queue]
data_bytes = 178450
trimming = true
ecn_kmin = 37350
ecn_kmax = 145250
[transport]
kind = "mrc"
evs = 128
nscc = true
[workload]
TOML
    printf '%s\n' "$@"
  } >"$file"
}
