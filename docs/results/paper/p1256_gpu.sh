#!/usr/bin/env bash
# The 12-5-6 paper runs on one lent GPU (paper.md, "Reproduce"): the three runs
# (NDMZ with the paper's tree, NDMZ with ours, AlphaZero) share the GPU at 2,048
# lanes, a loop step about one round of 300 games.
#
#   MODE=train: each run trains toward round 100 until STOP_AT seconds, when
#     SIGTERM stops it (the checkpoint is saved with its games and seconds);
#   MODE=score: the same commands with --score-now score each run where it
#     stopped, training nothing (1,000 games against optimal and random, the
#     exact greedy and value scores), for at most SCORE_FOR seconds.
#
# A SIGTERM before a run's first step (while it solves 12-5-6 for its reference
# scores, 2-5 CPU minutes, or compiles) stops it with nothing saved: STOP_AT is
# the whole budget, start-up included. Tried on a CPU (tiny networks, two runs on
# one core, STOP_AT=200, then MODE=score) on 2026-11-28.
#
# The solve is skipped when the solution is carried in: copy this machine's
# cached 12-5-6 solution (envs.nannon_solver.cache_dir(), 25 MB, checked by
# its checksum when read) into $SOLVED (default .cache/solved, git-ignored) and
# carry it too: carry [".whl", ".cache/solved"]. The runs then use $SOLVED as
# ANAKIN_MZ_CACHE (the solution's and XLA's cache).
#
#   mkdir -p .cache/solved && cp ~/.cache/anakin_mz/nannon_12-5-6_*.npz .cache/solved/
#
# Each mode ends by packing every run directory (its latest checkpoint only) into
# $OUT/<run>.tgz; a point that the score mode did not finish is scored on a CPU
# by the same command with --score-now after unpacking. Run it from the
# repository root on the device, the wheels the device lacks in .whl (carry
# [".whl"]); a second call on the warm machine finds the first's run
# directories in $RUNS:
#
#   MODE=train SEEDS=1 STOP_AT=420 bash docs/results/paper/p1256_gpu.sh
#   MODE=score SEEDS=1 bash docs/results/paper/p1256_gpu.sh
#
# Then, here: tar xzf each tarball into runs/paper/ and `anakin-mz experiment
# import runs/paper/p1256g_*_s1/records.jsonl --into
# docs/results/records/paper.jsonl --experiment paper_1256 --variant ...
# --round-games 300 --device ...` (one call per variant).
set -u
: "${MODE:=train}" "${SEEDS:=1}" "${STOP_AT:=420}" "${SCORE_FOR:=300}"
: "${RUNS:=/tmp/runs}" "${OUT:=/tmp/out}" "${PYTHON:=python3}"
: "${LANES:=train.num_envs=2048 train.replay_capacity=50 train.min_replay=16}"
: "${SCORING:=--score paper --exact greedy,value --eval-games 1000}"
# <name>=<agent entry>: the run directory's prefix and the --agents entry.
: "${AGENTS:=ndmz=ndmz ours=ndmz:search.tree=ndmz az=alphazero:search.tree=ndmz:network.noop_action=false}"
case "$MODE" in
  train) limit=$STOP_AT extra="" ;;
  score) limit=$SCORE_FOR extra="--score-now" ;;
  *) echo "MODE must be train or score, got $MODE" >&2; exit 2 ;;
esac
if ls .whl/*.whl > /dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
: "${SOLVED:=.cache/solved}"
if ls "$SOLVED"/nannon_12-5-6_*.npz > /dev/null 2>&1; then
  export ANAKIN_MZ_CACHE=$(cd "$SOLVED" && pwd)
fi
mkdir -p "$RUNS" "$OUT"
dirs=()
for seed in $SEEDS; do
  for pair in $AGENTS; do
    name=${pair%%=*} agent=${pair#*=} dir="$RUNS/p1256g_${name}_s${seed}"
    dirs+=("$dir")
    # $SCORING, $extra and $LANES unquoted: each is a list of words.
    timeout -s TERM "$limit" "$PYTHON" scripts/compare.py --env nannon \
      --config paper/nannon_1256_ndmz --agents "$agent" --seeds "$seed" \
      --games 30000 --every 30000 --score-from 30000 $SCORING \
      --devices 1 --out "$dir" $extra $LANES \
      > "$OUT/$(basename "$dir").$MODE.log" 2>&1 &
  done
done
wait
for dir in "${dirs[@]}"; do
  [ -d "$dir" ] || continue
  keep=()
  for run in "$dir"/*/; do
    latest=$(ls "$run/checkpoints" 2> /dev/null | grep -E '^[0-9]+$' | sort -n | tail -1)
    for step in $(ls "$run/checkpoints" 2> /dev/null | grep -E '^[0-9]+$'); do
      [ "$step" = "$latest" ] || keep+=("--exclude=$(basename "$dir")/$(basename "$run")/checkpoints/$step")
    done
  done
  tar czf "$OUT/$(basename "$dir").tgz" -C "$(dirname "$dir")" "${keep[@]}" "$(basename "$dir")"
done
ls -la "$OUT"
tail -n 3 "$OUT"/*.log
