"""The NDMZ search's settings (`SearchConfig`) and result (`SearchOutput`)."""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Optional, Tuple

import chex
import mctx

from anakin_mz.core.checks import is_int

PAYOFFS = ("single", "zero_sum", "collaborative")
_IDENTITY_MODES = ("sample", "argmax")
_CHANCE_MODES = ("sample", "prior_minus_visits")
_ROOTS = ("puct", "gumbel", "expectimax")
FINAL_MOVES = ("visits", "q", "expectimax")
CHANCE_VALUES = ("head", "expected")
BACKUPS = ("mean", "expectation")
TREES = ("ndmz", "paper")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """Static settings of the NDMZ search (hashable: usable as a static arg).

  Attributes:
    num_simulations: simulations per search (each expands one node).
    max_depth: maximum tree depth in edges (None: num_simulations). As in
      mctx, a simulation that hits the limit re-evaluates the node there
      (with identity_mode="sample" its kind is drawn again).
    dirichlet_alpha: concentration of the root Dirichlet noise.
    dirichlet_fraction: weight of the noise in the root prior (0 disables it).
    dirichlet_legal_only: draw the noise over the legal actions only
      (AlphaZero), so its whole weight lands on moves the root can make. False
      draws it over all A actions as `mctx.muzero_policy` does; where few of
      many actions are legal (Carchess: 4 of 100) most of it is then masked
      away. (A Dirichlet draw restricted to a subset and renormalised is the
      Dirichlet of that subset, so True is exact AlphaZero noise.)
    pb_c_init: c_1 of the MuZero PUCT formula.
    pb_c_base: c_2 of the MuZero PUCT formula.
    root: "puct" (the root and every choice node use PUCT, with the root
      Dirichlet noise; the move is drawn from the visit counts) or "gumbel"
      (Gumbel MuZero, `mctx.gumbel_muzero_policy`: sequential halving over
      Gumbel-perturbed logits at the root; every interior choice node uses
      Gumbel MuZero's deterministic rule `argmax(softmax(logits + sigma(Q)) -
      visits / (1 + sum visits))` on the completed Q seen from its mover's
      side; chance and terminal nodes are unchanged). With "gumbel" the root
      Dirichlet settings and pb_c_init / pb_c_base are not used: the Gumbel
      draw is the root exploration. "expectimax" grows no tree: a full-width
      expectimax of `expectimax_depth` moves on the model (`expectimax`:
      every chance outcome averaged by the chance policy, every choice node
      its mover's best of `expectimax_width` moves); the move is the legal
      move of highest value and the policy target its one-hot, so it is a
      play-time search (`play_search`; the config refuses it for self-play).
      It reads `expectimax_depth`, `expectimax_width`,
      `expectimax_chance_width`, `expectimax_min_prior`, `terminal_nodes`
      and `discount`, no other key.
    max_num_considered_actions: (gumbel) m, the actions sequential halving
      starts with (fewer where fewer are legal). Must not exceed
      num_simulations: with n < m simulations mctx visits only n of them, the
      same search as m = n, so a larger m is refused rather than truncated.
    gumbel_scale: (gumbel) scale of the root Gumbel noise; 0 makes the search
      deterministic (mctx's setting for evaluation). The noise actually used
      is `gumbel_scale * temperature` (see `ndmz_search`).
    completed_q_value_scale: (gumbel) c_scale of sigma(q) = (c_visit +
      max visits) * c_scale * q, mctx's `value_scale`.
    completed_q_maxvisit_init: (gumbel) c_visit above, mctx's `maxvisit_init`.
    completed_q_rescale_values: (gumbel) min-max rescale the completed Q to
      [0, 1] before sigma (mctx's `rescale_values`).
    completed_q_use_mixed_value: (gumbel) unvisited actions get the mixed
      value (raw value and the prior-weighted visited Q, Appendix D of the
      Gumbel MuZero paper) rather than the raw value (mctx's
      `use_mixed_value`).
    identity_mode: "sample" (roulette wheel on the identity head, the NDMZ
      paper) or "argmax" (the thesis).
    chance_mode: "sample" (draw the child from the chance policy) or
      "prior_minus_visits" (deterministic: argmax of prob - visit share).
    terminal_nodes: predicted-terminal nodes are not expanded further.
    value_bounds: how PUCT scales the mover's Q at a choice node. None (the
      default, `mctx.qtransform_by_parent_and_siblings`): by the min and max
      of the node's own value and its visited children's Q, unvisited
      children at that min. `(low, high)` (`mctx.qtransform_by_min_max`): by
      that fixed range, e.g. `[-1, 1]` for outcomes in [-1, 1]; an
      unvisited child's Q is the tree's initial 0. Min-max over a few visits
      stretches small, noisy Q differences to the whole [0, 1], so the value
      term outweighs the prior (docs/results/search.md). NDMZ's and
      AlphaZero's search read it; Stochastic MuZero searches with
      `mctx.stochastic_muzero_policy`, whose Q scaling is mctx's min-max.
    tree: which tree the simulations grow. "ndmz" (the default, this
      project's): a node's kind is drawn from the identity head once, when
      the node is expanded; every simulation backs up; Q adds the predicted
      rewards. "paper": the NDMZ paper's tree (3.3 and the Appendix A
      pseudocode), which differs in three ways: (1) an *identity node*
      follows every choice and chance edge, its children one per identity
      class (each relative player's choice node, a chance node, a terminal
      node), and a child is drawn by roulette on the identity head at
      *every* visit (`identity_mode="argmax"` takes the most likely class
      instead), so one state can grow both a choice and a chance subtree;
      (2) only a simulation that ends at a choice or a terminal node backs
      up: one that ends by expanding an identity or a chance node backs up
      nothing (and counts no visit), and every expansion, model call or
      not, takes one simulation; (3) rewards are ignored (the paper's
      pseudocode is for board games): a choice leaf backs up its value, the
      value f gave at its identity parent, and a terminal leaf, which is
      never expanded, backs up the value of the closest choice node above
      it (the root's is the root's value). Per-edge `discount` still
      applies on the model's edges (1 in the paper). The choice rule stays
      this config's PUCT (with the node's visits, 1 + the children's, under
      the square root; the paper writes the children's sum, 0 at a node's
      first selection). "paper" needs `root="puct"` and `max_depth=None`
      (or `root="expectimax"`, which grows no tree and reads none of this:
      a play search on a config whose self-play grows the paper's tree).
      `search_tree.embeddings.kind` is then 3 at identity nodes.
    discount: per-edge discount of the tree, `Q(s, a) = r + discount * V`:
      it must be the discount of the value targets the model learned
      (`Config` sets it from its one `discount`). Below 1 it makes quick
      wins worth more than slow ones, which separates the moves of a side
      that wins (or loses) in every line.
    expectimax_depth: the moves searched by the players that plan on the
      real game and grow no tree (`lookahead.expectimax_policy`):
      TD(lambda), in self-play and at play, and `evaluate.py --player
      value`. 1 is TD-Gammon's 1-ply expectimax; 2 also tries every reply to
      every chance outcome, at about `(1 + C) * max_legal_actions` times the
      network calls (C = `env.max_chance_outcomes`; EinStein: 42x); at most
      3, as each move multiplies the cost again. The same on the learned
      model for `root="expectimax"`; the tree searches ignore it.
    expectimax_width: (`root="expectimax"`) the moves tried at a choice
      node: the root's legal moves of highest prior, and below the root
      (where a learned model knows no legal mask) the actions of highest
      prior. None: all A actions. A game's `max_legal_actions` (Nannon
      6-3-6: 3) tries every legal root move at the least cost.
    expectimax_chance_width: (`root="expectimax"`) the chance outcomes
      averaged at a chance node: its most likely ones, their probabilities
      renormalised. None: all C. Exact where the others have no
      probability: Nannon's die has 6 of its 16 outcome slots below the
      opening roll, so 6 averages the same dice at 3/8 of the calls per
      chance level.
    expectimax_afterstate: (`root="expectimax"`) a chance node with no
      moves left below it is worth its own value head (Stochastic MuZero's
      afterstate value) instead of the chance policy's expectation one step
      deeper. At depth 1 each move is then worth `r + discount * v` of
      `g(h(o), a)`, the planning diagnosis's `model_1ply`; at depth 2 the
      reply's afterstate ends the line. On Nannon 6-3-6 the afterstate
      ranks the moves better than the die averaged (planning.md, E11), at
      1/C of the deepest level's model calls. The other roots do not read
      it, as the other `expectimax_*` keys (so `--search root=puct` works on
      a config that plays this search).
    expectimax_min_prior: (`root="expectimax"`) below the root, an action
      whose prior probability is under this is not tried (the most likely
      one always is): a learned model's prior holds almost no mass on moves
      its policy targets never held, the illegal ones, whose values it was
      never taught.
    final_move: (puct root, this project's tree) the greedy move, at
      temperature 0 (evaluation and play): "visits" (the most visited legal
      move, ties by the prior: MuZero), "q" (the visited legal move of
      highest root Q, the mean of its simulations, ties by visits) or
      "expectimax" (the visited legal move of highest expectimax backup of
      the grown tree: max at choice nodes, the chance policy's expectation
      at chance nodes, `search.backup`). At a temperature above 0 the move
      is still drawn from the visits, and the policy target is the visit
      distribution either way. The Gumbel root ignores it (its move is the
      sequential-halving winner).
    chance_value: (this project's tree) the value a newly expanded chance
      node backs up. "head" (MuZero's rule): the value head at the node,
      f(g(s, a)), the afterstate value. "expected": the chance policy's
      expectation over the node's outcomes of `reward + discount * value`,
      each outcome's child given by one more model call (`identity` argmax
      terminal: value 0), i.e. the value one step of chance deeper, as
      TD-Gammon's 1-ply and the real-game `--player value` average the dice.
      It costs `num_chance_outcomes` more model calls per simulation (batched
      with the expansion), and the children are not added to the tree. Why:
      on Nannon the model's afterstate values play below its values one die
      deeper (`model_1ply` vs `model_chance`, docs/results/planning.md), and
      a chance node's first backup is all most of them get in a small search.
    backup: (this project's tree) the root Q the final decision reads once
      the simulations are done. "mean": MCTS's running mean (mctx's node
      values). "expectation": the same, except that every chance node is
      re-backed-up as the chance policy's expectation over its expanded
      outcomes (the rest at its own value) instead of the visit-weighted
      mean (`backup.with_expected_chance`): a simulation that went through a
      die value then counts by that die's probability, not by how often the
      tree happened to draw it. The selection inside the tree is unchanged.
      Read by the Gumbel root (its move and its completed-Q policy target)
      and by `final_move="q"`; the other final moves do not read root Q
      this way, so it is refused with them.
  """

  num_simulations: int = 50
  max_depth: Optional[int] = None
  dirichlet_alpha: float = 0.3
  dirichlet_fraction: float = 0.25
  dirichlet_legal_only: bool = False
  pb_c_init: float = 1.25
  pb_c_base: float = 19652.0
  root: str = "puct"
  max_num_considered_actions: int = 16
  gumbel_scale: float = 1.0
  completed_q_value_scale: float = 0.1
  completed_q_maxvisit_init: float = 50.0
  completed_q_rescale_values: bool = True
  completed_q_use_mixed_value: bool = True
  identity_mode: str = "sample"
  chance_mode: str = "sample"
  terminal_nodes: bool = True
  value_bounds: Optional[Tuple[float, float]] = None
  tree: str = "ndmz"
  discount: float = 1.0
  expectimax_depth: int = 1
  expectimax_width: Optional[int] = None
  expectimax_chance_width: Optional[int] = None
  expectimax_afterstate: bool = False
  expectimax_min_prior: float = 0.01
  final_move: str = "visits"
  chance_value: str = "head"
  backup: str = "mean"

  def __post_init__(self):
    if not is_int(self.num_simulations) or self.num_simulations < 1:
      raise ValueError(f"num_simulations must be an int >= 1, got {self.num_simulations!r}")
    if not is_int(self.expectimax_depth) or not 1 <= self.expectimax_depth <= 3:
      raise ValueError(f"expectimax_depth must be an int in 1..3, got {self.expectimax_depth!r}")
    width = self.expectimax_width
    if width is not None and (not is_int(width) or width < 1):
      raise ValueError(f"expectimax_width must be null (all actions) or an int >= 1, got {width!r}")
    width = self.expectimax_chance_width
    if width is not None and (not is_int(width) or width < 1):
      raise ValueError(
        f"expectimax_chance_width must be null (all outcomes) or an int >= 1, got {width!r}"
      )
    self._check_number("expectimax_min_prior", 0.0, strict=False)
    if self.expectimax_min_prior >= 1.0:
      raise ValueError(
        f"expectimax_min_prior must be below 1 (a probability threshold), got "
        f"{self.expectimax_min_prior!r}"
      )
    if self.max_depth is not None and (not is_int(self.max_depth) or self.max_depth < 1):
      raise ValueError(f"max_depth must be None or an int >= 1, got {self.max_depth!r}")
    if self.identity_mode not in _IDENTITY_MODES:
      raise ValueError(
        f"identity_mode must be one of {_IDENTITY_MODES}, got {self.identity_mode!r}"
      )
    if self.chance_mode not in _CHANCE_MODES:
      raise ValueError(f"chance_mode must be one of {_CHANCE_MODES}, got {self.chance_mode!r}")
    self._check_number("dirichlet_alpha", 0.0, strict=True)
    if not 0.0 <= self.dirichlet_fraction <= 1.0:
      raise ValueError(f"dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction!r}")
    if not 0.0 < self.discount <= 1.0:
      raise ValueError(f"discount must be in (0, 1], got {self.discount!r}")
    self._check_number("pb_c_init", 0.0, strict=False)
    self._check_number("pb_c_base", 0.0, strict=True)
    for name in ("dirichlet_legal_only", "terminal_nodes", "expectimax_afterstate"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
    if self.final_move not in FINAL_MOVES:
      raise ValueError(f"final_move must be one of {FINAL_MOVES}, got {self.final_move!r}")
    if self.chance_value not in CHANCE_VALUES:
      raise ValueError(f"chance_value must be one of {CHANCE_VALUES}, got {self.chance_value!r}")
    if self.backup not in BACKUPS:
      raise ValueError(f"backup must be one of {BACKUPS}, got {self.backup!r}")
    if self.backup != "mean" and self.root == "puct" and self.final_move != "q":
      raise ValueError(
        f"backup={self.backup!r} changes the root Q, which the PUCT root's "
        f"final_move={self.final_move!r} does not read: use final_move=q or root=gumbel"
      )
    self._check_root()
    self._check_value_bounds()
    self._check_tree()

  def _check_tree(self):
    if self.tree not in TREES:
      raise ValueError(f"tree must be one of {TREES}, got {self.tree!r}")
    if self.tree != "paper" or self.root == "expectimax":
      return  # the expectimax grows no tree: a play search on a paper-tree config
    if self.root != "puct":
      raise ValueError(
        f"tree 'paper' runs with root 'puct' only, got root {self.root!r}: sequential "
        "halving counts one visit per simulation, and the paper's tree backs up only "
        "the simulations that end at a choice or terminal node"
      )
    if self.final_move != "visits":
      raise ValueError(
        f"tree 'paper' picks its move by the visits, got final_move={self.final_move!r}: "
        "its identity nodes have no backup of their own"
      )
    if self.chance_value != "head":
      raise ValueError(
        f"tree 'paper' backs up the head's values, got chance_value={self.chance_value!r}: "
        "its chance nodes back up nothing"
      )
    if self.max_depth is not None:
      raise ValueError(
        f"tree 'paper' has no depth limit (the paper's has none), got max_depth="
        f"{self.max_depth!r}: leave max_depth null"
      )

  def _check_value_bounds(self):
    bounds = self.value_bounds
    if bounds is None:
      return
    ok = (
      isinstance(bounds, (list, tuple))
      and len(bounds) == 2
      and all(
        isinstance(b, numbers.Real) and not isinstance(b, bool) and math.isfinite(b) for b in bounds
      )
      and bounds[0] < bounds[1]
    )
    if not ok:
      raise ValueError(
        f"value_bounds must be null (min-max over the parent and siblings) or "
        f"[low, high] with finite low < high, got {bounds!r}"
      )
    object.__setattr__(self, "value_bounds", (float(bounds[0]), float(bounds[1])))

  def _check_number(self, name: str, low: float, *, strict: bool):
    """A real, finite knob above `low` (at or above it unless `strict`)."""
    value = getattr(self, name)
    ok = (
      isinstance(value, numbers.Real)
      and not isinstance(value, bool)
      and math.isfinite(value)
      and (value > low if strict else value >= low)
    )
    if not ok:
      raise ValueError(
        f"{name} must be a finite number {'>' if strict else '>='} {low}, got {value!r}"
      )

  def _check_root(self):
    """The root rule and the Gumbel knobs (checked whatever the root is, so
    a typo never waits for the day the Gumbel root is switched on)."""
    if self.root not in _ROOTS:
      raise ValueError(f"root must be one of {_ROOTS}, got {self.root!r}")
    m = self.max_num_considered_actions
    if not is_int(m) or m < 1:
      raise ValueError(f"max_num_considered_actions must be an int >= 1, got {m!r}")
    self._check_number("gumbel_scale", 0.0, strict=False)
    self._check_number("completed_q_value_scale", 0.0, strict=True)
    self._check_number("completed_q_maxvisit_init", 0.0, strict=False)
    for name in ("completed_q_rescale_values", "completed_q_use_mixed_value"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
    if self.root == "gumbel" and m > self.num_simulations:
      raise ValueError(
        f"root 'gumbel' with num_simulations={self.num_simulations} below "
        f"max_num_considered_actions={m}: sequential halving would visit "
        f"only {self.num_simulations} of the {m} considered actions (mctx "
        "silently searches as if m were num_simulations); set "
        f"max_num_considered_actions <= {self.num_simulations} or raise "
        "num_simulations"
      )


@chex.dataclass(frozen=True)
class SearchOutput:
  """Result of `ndmz_search` for a batch of B roots.

  Attributes:
    action: `[B]` int32 player action. PUCT root: drawn from the root visit
      counts with the temperature (greedy at temperature 0). Gumbel root: the
      sequential-halving winner, the argmax of `gumbel + logits + sigma(Q)`
      over the most visited legal actions.
    action_weights: `[B, A]` the policy target. PUCT root: the root visit
      distribution over the legal actions. Gumbel root: the completed-Q
      policy `softmax(logits + sigma(completed Q))` over the legal actions
      (mctx's `action_weights`; no noise in it).
    root_value: `[B]` search value of the root, root mover's POV.
    search_tree: the `mctx.Tree`, `S = max(A, C)` slots per node, all values
      root mover's POV with discount `config.discount`.
      `search_tree.embeddings` is a `_Node` with fields `embedding` (the
      user's), `kind` `[B, N]` (0 choice, 1 chance, 2 terminal) and `player`
      `[B, N]` (relative player of choice nodes, 0 otherwise). With
      `tree="paper"`: `S = max(A, C, P + 2)`, kind 3 marks identity nodes,
      the rewards are 0 and the `_Node` is a `paper._PaperNode` (the same
      fields and more).
  """

  action: chex.Array
  action_weights: chex.Array
  root_value: chex.Array
  search_tree: mctx.Tree
