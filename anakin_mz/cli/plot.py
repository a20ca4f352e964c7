"""TensorBoard runs -> PNG figures (no TensorFlow: tensorboard's own
EventAccumulator reads the event files).

    anakin-mz plot runs/nannon
    anakin-mz plot runs/nannon runs/nannon_k3 --out figures
    anakin-mz plot --hidden-tsne runs/nannon/checkpoints [--step N] [--out map.png]

Figures written to --out (default <first run>/plots):

* learning.png: evaluation scores (eval/*_score_mean, eval/*_win_rate,
  Nannon's exact/* win probabilities, the self-play return) against env
  steps, one line per run; learning_wallclock.png: the same against
  training wall-clock (minutes, from train/wall_s); learning.md: a table of
  those scores at the same env-step and wall-clock budget for every run;
* losses.png: every loss term (train/{total,reward,value,policy,chance,
  identity,l2}, identity accuracy, gradient norm) against update step;
* throughput.png: env steps/s, search simulations/s, updates/s;
* dynamics_<run>.png: the dynamics tests in the style of the NDMZ paper's
  Figure 3, success rate against training step with one line per unroll
  depth k (top-move and uniform tests), plus identity accuracy, chance total
  variation and reward error when logged (tags dynamics/<metric>_k<k>, see
  anakin_mz.eval.dynamics).

A run is a directory holding events.out.tfevents.* files; a directory whose
sub-directories are runs counts as all of them. The library behind it is
`anakin_mz.eval.plots`; it needs the `plot` extra (matplotlib).

--hidden-tsne CHECKPOINT instead draws the hidden-state map (MooZi 5.9): the
representation's hidden states of --positions decision positions of random
games, embedded with scikit-learn's t-SNE, in three panels coloured by
predicted value, mover and phase (`anakin_mz.eval.hidden_map`); written to --out
(a .png path; default <checkpoint>/hidden_tsne_<step>.png).
"""

from __future__ import annotations

import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("runs", nargs="*", help="TensorBoard log directories")
  parser.add_argument("--out", default=None, help="output directory (--hidden-tsne: PNG path)")
  parser.add_argument("--hidden-tsne", metavar="CHECKPOINT", default=None)
  parser.add_argument("--step", type=int, default=None, help="checkpoint step (--hidden-tsne)")
  parser.add_argument("--positions", type=int, default=3000, help="positions (--hidden-tsne)")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if (args.hidden_tsne is None) == (not args.runs):
    parser.error("give run directories or --hidden-tsne CHECKPOINT (not both)")
  if args.hidden_tsne is not None:
    return _hidden_tsne(args)
  from anakin_mz.eval import plots

  try:
    written = plots.make_plots(args.runs, args.out)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not written:
    print(
      "error: no known scalar tags (eval/, exact/, train/*loss*, throughput/, "
      "dynamics/) in these runs",
      file=sys.stderr,
    )
    return 2
  for path in written:
    print(f"wrote {path}")
  return 0


def _hidden_tsne(args) -> int:
  import os

  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.eval import hidden_map

  out = args.out
  if out is None:
    tag = "latest" if args.step is None else str(args.step)
    out = os.path.join(args.hidden_tsne, f"hidden_tsne_{tag}.png")
  if not out.endswith(".png"):
    print(f"error: --out must be a .png path with --hidden-tsne, got {out!r}", file=sys.stderr)
    return 2
  try:
    path = hidden_map.hidden_tsne_png(args.hidden_tsne, out, args.step, args.positions, args.seed)
  except (ValueError, ImportError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"wrote {path}")
  return 0
