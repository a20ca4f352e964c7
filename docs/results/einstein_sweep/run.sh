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
. "$(dirname "$0")/../sweep.sh"
sweep einstein "$core" "$minutes" 4000 vs_emm2.json "--opponent expectiminimax:2" "$@"
