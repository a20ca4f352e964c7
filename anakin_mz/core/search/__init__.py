"""Nondeterministic MuZero (NDMZ) tree search, built on `mctx.search`.

The tree is mctx's own: no fork. What NDMZ adds lives in two places:

* The embedding stored in every node is wrapped in `_Node`, which also holds
  the node's *kind* (choice, chance or terminal) and, for a choice node, its
  *relative player* (0 = the root mover).
* Custom root/interior action selection functions read the kind and pick a
  child: PUCT at choice nodes, a draw from the chance policy at chance nodes.

Slots. mctx gives every node the same number of child slots; we use
`S = max(A, C)` (A choice actions, C chance outcomes). At a choice node slot
`a` is player action `a` (slots `>= A` are masked); at a chance node slot `c` is
chance outcome `c` (slots `>= C` masked). The recurrent wrapper turns the slot
into the *unified* action of `anakin_mz.core.types` (`a`, or `A + c`) before calling
the user's `recurrent_fn` (g then f).

Node kinds. The root is a choice node of relative player 0, with the real legal
mask and Dirichlet noise mixed in as in `mctx.muzero_policy`. Every expansion
reads the identity head of the new state: sampled (the NDMZ paper's roulette
wheel, `identity_mode="sample"`) or argmax (the thesis, `"argmax"`). The class
decides the node's kind once, when it is created:

* choice node of relative player r: children priors = choice policy, children
  chosen by PUCT (the MuZero formula of `mctx.muzero_action_selection`,
  pb_c_init / pb_c_base) on Q seen from the mover's side. In a zero-sum game
  the mover's Q is the negated root-POV Q when r != 0 (with more than two
  players every other player counts as the root mover's opponent); in
  single-player and collaborative games it is the root-POV Q. The Q-values are
  min-max normalised over the node value and its children's Q-values after the
  sign, like `mctx.qtransform_by_parent_and_siblings`. A slot whose prior
  logit is the masking logit (finfo.min) is never picked: a learned model
  never gives it; the real game as the model (`alphazero.TrueModel`) masks
  the illegal moves of interior nodes with it, as the root's are.
* chance node: children priors = chance policy; a child is drawn from them
  (`chance_mode="sample"`) or chosen by the deterministic rule
  `argmax(prob - visits / (1 + sum visits))` (`"prior_minus_visits"`).
* terminal node (`terminal_nodes=True`, thesis IV-C 2): not expanded further.
  Its value is 0 and anything mctx grows below it has reward 0 and value 0 (the
  wrapper does not use the model there), so what backs up through a terminal
  node is exactly the predicted reward of the transition into it. With
  `terminal_nodes=False` the terminal class is ignored (the kind is decided
  among the other classes) and the search runs past predicted ends, as MuZero.

Point of view. Every value and reward stored in the tree (`node_values`,
`raw_values`, `children_values`, `children_rewards`, `SearchOutput.root_value`)
is from the point of view of the *root mover*, with the same discount
`config.discount` (+1 by default, never negative) on every edge:
`Q(s, a) = r(s, a) + discount * V(child)`, all root-mover POV. Turn order is
never hard-coded: it lives in the per-node relative player, so no discount of -1 is
needed. With a model that strictly alternates two players and never predicts
chance or terminal, this search makes exactly the choices of
`mctx.muzero_policy` with discount -1 (tested).

The paper's tree (`config.tree="paper"`, `paper`). The NDMZ paper's
Appendix A pseudocode on the same arrays, with a simulation loop of its own:
an identity node after every choice and chance edge whose class is drawn by
roulette again at every visit, a backup only when a simulation ends at a
choice or terminal node, and no rewards (a terminal node backs up the value of
the closest choice node above it). PUCT root only. `SearchConfig.tree` and
`anakin_mz.core.search.paper` say how it differs from the tree above.

Gumbel root (`config.root="gumbel"`, `gumbel`). The root runs Gumbel MuZero's
sequential halving (`mctx.gumbel_muzero_policy`, Danihelka et al. 2022) over
Gumbel-perturbed logits of its legal actions, and every interior choice node
uses Gumbel MuZero's deterministic rule on the completed Q seen from its
mover's side (the sign rule above); chance and terminal nodes stay as
described. The move is the sequential-halving winner and the policy target
`softmax(logits + sigma(completed Q))`. No root Dirichlet noise: the Gumbel
draw is the exploration, scaled by `gumbel_scale * temperature`. With the
alternating model above it makes exactly the choices of
`mctx.gumbel_muzero_policy` with discount -1 for the same key (tested).

Expectimax (`config.root="expectimax"`, `expectimax`). No tree and no
simulations: a full-width expectimax of `expectimax_depth` moves on the
model, the same nodes (kinds by the identity head's argmax), every chance
outcome averaged by the chance policy, every choice node its mover's best of
its `expectimax_width` moves of highest prior. The move is the best legal
one. A play-time search (`play_search`): it gives self-play no visits to
train on, and the config refuses it there.
"""

from anakin_mz.core.search.config import SearchConfig, SearchOutput
from anakin_mz.core.search.puct import add_root_noise, ndmz_search, search_output, select_action
from anakin_mz.core.search.tree import mover_sign

__all__ = [
  "SearchConfig",
  "SearchOutput",
  "ndmz_search",
  "search_output",
  "add_root_noise",
  "select_action",
  "mover_sign",
]
