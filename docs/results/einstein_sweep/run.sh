#!/usr/bin/env bash
# The EinStein config sweep (issue 19): one variant after another on one
# core, MINUTES of wall-clock each (compilation and the periodic evaluations
# against random included), then the final checkpoint plays 1000 games
# against expectiminimax:2 (evaluation seed 5, 32 simulations unless the
# variant sets its own). Usage: run.sh CORE MINUTES NAME... (names below).
# Two of these at once, one per core, is the setting of einstein_sweep.md.
set -u
core=${1:?core}; minutes=${2:?minutes}; shift 2
declare -A variants=(
  [base]=""
  [td10]="train.td_steps=10"
  [k3]="train.unroll_steps=3"
  [temp]="train.temperature_end=0.1 train.temperature_decay_updates=1000"
  [cosine]="train.lr_schedule=cosine"
  [sims64]="search.num_simulations=64"
  [h128]="network.hidden=[128,128]"
  [cat]="network.value_head=categorical"
  [rr4]="train.replay_ratio=4 train.total_updates=12000"
  [sims16]="search.num_simulations=16"
  [conv]="network.kind=conv"
  [h128sims64]="network.hidden=[128,128] search.num_simulations=64"
  [gumbel]="search.root=gumbel"
  [pmv]="search.chance_mode=prior_minus_visits"
  [gumbelpmv]="search.root=gumbel search.chance_mode=prior_minus_visits"
  [gumbel16]="search.root=gumbel search.num_simulations=16"
  [gumbelt1]="search.root=gumbel train.temperature_end=1.0"
  [lr3e4]="train.learning_rate=0.0003"
  [reana]="train.reanalyse_fraction=0.5 train.td_steps=5"
  [vw4]="loss.value_weight=4"
  [temp0]="train.temperature_start=0 train.temperature_end=0"
  [temp0nd]="train.temperature_start=0 train.temperature_end=0 search.dirichlet_fraction=0"
  [temp0vw4]="train.temperature_start=0 train.temperature_end=0 loss.value_weight=4"
  [sv1]="loss.successor_value_weight=1"
  [sv1temp1td4]="train.temperature_end=1.0 train.td_steps=4 loss.successor_value_weight=1"
)
mkdir -p runs/einstein_sweep
for name in "$@"; do
  overrides=${variants[${name%_s*}]-MISSING}
  [ "$overrides" = MISSING ] && { echo "unknown variant $name" >&2; exit 2; }
  seed=0; case $name in *_s1) seed=1 ;; esac
  dir=runs/einstein_sweep/$name
  # $overrides unquoted: one argument per override.
  taskset -c "$core" python3 scripts/train.py --env einstein --config configs/einstein.yaml \
    --minutes "$minutes" --seed "$seed" --logdir "$dir" --no-progress \
    train.total_updates=4000 $overrides > "$dir.log" 2>&1
  taskset -c "$core" python3 scripts/evaluate.py --checkpoint "$dir/checkpoints" \
    --opponent expectiminimax:2 --games 1000 --seed 5 --json "$dir/vs_emm2.json" \
    > "$dir.eval.log" 2>&1
done
