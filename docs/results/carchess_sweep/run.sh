#!/usr/bin/env bash
# The Carchess config sweep (issue 19, item 3): one variant after another on
# one core, MINUTES of wall-clock each (compilation and the periodic
# evaluations included) with train.total_updates=5000 (the temperature decay
# ends inside the run; a variant that reaches 5,000 updates first stops
# there), then the final checkpoint plays 1000 games (evaluation seed 5,
# search with the run's own simulations): the mean score is the measure.
# Usage: run.sh CORE MINUTES NAME... (names below; NAME_s1 trains seed 1).
# Two of these at once, one per core, is the setting of carchess_sweep.md.
set -u
core=${1:?core}; minutes=${2:?minutes}; shift 2
declare -A variants=(
  [base]=""
  [td10]="train.td_steps=10"
  [sv1temp1td4]="loss.successor_value_weight=1 train.temperature_end=1.0 train.td_steps=4"
  [sims32]="search.num_simulations=32"
  [k3]="train.unroll_steps=3"
  [rr4]="train.replay_ratio=4 train.total_updates=10000"
  [cosine]="train.lr_schedule=cosine train.learning_rate_end=0.0001"
  [pmv]="search.chance_mode=prior_minus_visits"
)
. "$(dirname "$0")/../sweep.sh"
sweep carchess "$core" "$minutes" 5000 eval.json "" "$@"
