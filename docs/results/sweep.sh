# The loop of the config sweeps (sourced by <game>_sweep/run.sh, which
# defines the associative array `variants`: name -> overrides).
#   sweep GAME CORE MINUTES UPDATES JSON "EVAL ARGS" NAME...
# trains each variant (NAME_s1: seed 1, else seed 0) on core CORE for at
# most MINUTES with train.total_updates=UPDATES (a variant's own
# total_updates wins) into runs/GAME_sweep/NAME, then plays its last
# checkpoint 1000 games (evaluation seed 5, plus EVAL ARGS) into NAME/JSON.
sweep() {
  local game=$1 core=$2 minutes=$3 updates=$4 json=$5 eval_args=$6
  shift 6
  mkdir -p "runs/${game}_sweep"
  local name overrides seed dir
  for name in "$@"; do
    overrides=${variants[${name%_s*}]-MISSING}
    [ "$overrides" = MISSING ] && { echo "unknown variant $name" >&2; return 2; }
    seed=0; case $name in *_s1) seed=1 ;; esac
    dir=runs/${game}_sweep/$name
    # $overrides and $eval_args unquoted: one argument per word.
    taskset -c "$core" python3 scripts/train.py --env "$game" --config "$game" \
      --minutes "$minutes" --seed "$seed" --logdir "$dir" --no-progress \
      "train.total_updates=$updates" $overrides > "$dir.log" 2>&1
    taskset -c "$core" python3 scripts/evaluate.py --checkpoint "$dir/checkpoints" \
      $eval_args --games 1000 --seed 5 --json "$dir/$json" > "$dir.eval.log" 2>&1
  done
}
