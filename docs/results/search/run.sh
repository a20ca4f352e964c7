#!/bin/bash
# The search against its own policy head on Nannon 6-3-6, scored exactly: each
# variant's search plays every one of the 2,530 decision positions once (fixed
# key) and the solver gives the exact win probability against the optimal
# player. One core: taskset -c 1 bash docs/results/search/run.sh CHECKPOINT OUTDIR
# (the variants override the checkpoint's own search; `minmax_sample16` is the
# search before value_bounds and all-children chance, whatever the config says)
set -euo pipefail
CK=${1:-nannon}
OUT=${2:-docs/results/search/$(basename "$CK" .msgpack)}
mkdir -p "$OUT"
variants=(
  "default:"
  "sims50:num_simulations=50"
  "sims100:num_simulations=100"
  "chance_all16:chance_mode=prior_minus_visits"
  "chance_all50:chance_mode=prior_minus_visits num_simulations=50"
  "identity_argmax16:identity_mode=argmax"
  "gumbel16:root=gumbel"
  "gumbel50:root=gumbel num_simulations=50"
  "bounds16:value_bounds=[-1,1]"
  "bounds50:value_bounds=[-1,1] num_simulations=50"
  "bounds_all16:value_bounds=[-1,1] chance_mode=prior_minus_visits"
  "bounds_all50:value_bounds=[-1,1] chance_mode=prior_minus_visits num_simulations=50"
  "bounds_all100:value_bounds=[-1,1] chance_mode=prior_minus_visits num_simulations=100"
  "minmax_sample16:value_bounds=null chance_mode=sample"
)
for v in "${variants[@]}"; do
  [ -z "$v" ] && continue
  name=${v%%:*}; items=${v#*:}
  [ -f "$OUT/$name.json" ] && continue   # resumable
  args=(); for i in $items; do args+=(--search "$i"); done
  anakin-mz evaluate --checkpoint "$CK" --games 2 --extra-policies greedy,search \
    "${args[@]}" --json "$OUT/$name.json.tmp" > /dev/null
  mv "$OUT/$name.json.tmp" "$OUT/$name.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); e=r['exact']; print(f\"{sys.argv[2]:<18} greedy {e['greedy_vs_optimal']:.4f} search {e['search_vs_optimal']:.4f}\")" "$OUT/$name.json" "$name"
done
