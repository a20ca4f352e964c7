#!/usr/bin/env bash
# The Nannon 6-3-6 config sweep: one run per variant, each pinned to its own
# core, all at once, MINUTES of wall-clock each (compilation and the periodic
# exact evaluations included). Usage: run.sh MINUTES ROUND [FIRST_CORE]
# Needs one free core per variant (15 here). Reads nothing but the repo.
set -u
minutes=${1:?minutes}
round=${2:?round: 1 or 2}
core=${3:-1}
mkdir -p runs/sweep
# Round 1: one knob at a time from anakin_mz/configs/nannon.yaml, seed 0.
round1=(
  "base|"
  "rr2|train.replay_ratio=2"
  "rr1|train.replay_ratio=1"
  "b128|train.batch_size=128"
  "b128rr2|train.batch_size=128 train.replay_ratio=2"
  "k3|train.unroll_steps=3"
  "sims8|search.num_simulations=8"
  "sims32|search.num_simulations=32"
  "tu12k|train.total_updates=12000"
  "lr3e-3|train.learning_rate=0.003"
  "h128|network.hidden=[128,128]"
  "envs128|train.num_envs=128"
  "gumbel|search.root=gumbel search.max_num_considered_actions=4"
  "temp2k|train.temperature_decay_updates=2000"
  "rr2k3tu15k|train.replay_ratio=2 train.unroll_steps=3 train.total_updates=15000"
)
# Round 2: round 1's two best (K = 3; hidden 128-128: cheaper updates),
# combined, with second seeds and neighbours.
h="network.hidden=[128,128]"
round2=(
  "base_s1|--seed 1"
  "k3_s1|--seed 1 train.unroll_steps=3"
  "h128_s1|--seed 1 $h"
  "h128k3|$h train.unroll_steps=3"
  "h128k3_s1|--seed 1 $h train.unroll_steps=3"
  "h128k2|$h train.unroll_steps=2"
  "h128k3b128|$h train.unroll_steps=3 train.batch_size=128"
  "h128k3rr2|$h train.unroll_steps=3 train.replay_ratio=2"
  "h128k3tu20k|$h train.unroll_steps=3 train.total_updates=20000"
  "h128k3lr2e-3|$h train.unroll_steps=3 train.learning_rate=0.002"
  "h128k3sims8|$h train.unroll_steps=3 search.num_simulations=8"
  "h128k3l64|$h train.unroll_steps=3 network.latent_dim=64"
  "h64k3|network.hidden=[64,64] train.unroll_steps=3"
  "h128k3envs32|$h train.unroll_steps=3 train.num_envs=32"
  "h128k3sims32|$h train.unroll_steps=3 search.num_simulations=32"
)
if [ "$round" = 1 ]; then variants=("${round1[@]}"); else variants=("${round2[@]}"); fi
for v in "${variants[@]}"; do
  name=${v%%|*}; overrides=${v#*|}
  # $overrides unquoted: one argument per override.
  case $overrides in --seed*) ;; *) overrides="--seed 0 $overrides" ;; esac
  taskset -c "$core" python3 scripts/train.py --env nannon --minutes "$minutes" \
    --logdir "runs/sweep/$name" --no-progress train.checkpoint_every=0 $overrides \
    > "runs/sweep/$name.log" 2>&1 &
  core=$((core + 1))
done
wait
