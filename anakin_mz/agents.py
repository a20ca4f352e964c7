"""The agents (`config.agent`), each a learner with `anakin.Learner`'s
interface (init, init_run, init_sharded, abstract_state, step, jit_step; a state with
params, update_step and env_steps), so the run loop, TensorBoard,
checkpoints and evaluation serve them all:

* `ndmz`: `anakin.Learner`, NDMZ's learned model in the search.
* `alphazero`: `AlphaZeroLearner`, the same search, self-play, replay and
  update loop with the real game as the model (`alphazero.TrueModel`) and
  AlphaZero's loss (value and policy only).
* `tdlambda`: `tdlambda.TDLambdaLearner`, TD(lambda) self-play of a value
  network that plays 1-ply expectimax.

The learner's `network` is also what `act.search_policy` dispatches on, so a
restored agent plays with its own policy.
"""

from __future__ import annotations

from typing import Optional

from jax.sharding import Mesh

from anakin_mz.alphazero import TrueModel, alphazero_loss
from anakin_mz.anakin import Learner
from anakin_mz.config import AGENTS, Config
from anakin_mz.tdlambda import TDLambdaLearner


class AlphaZeroLearner(Learner):
  """`anakin.Learner` with the true model in the search and AlphaZero's loss."""

  def __init__(self, config: Config, mesh: Optional[Mesh] = None):
    super().__init__(config, mesh)
    self.network = TrueModel(self.env, config.network, discount=config.discount)

  def _loss(self, params, batch):
    return alphazero_loss(params, self.network, batch, self.config.loss)


_LEARNERS = {"ndmz": Learner, "alphazero": AlphaZeroLearner, "tdlambda": TDLambdaLearner}
assert tuple(_LEARNERS) == AGENTS


def make_learner(config: Config, mesh: Optional[Mesh] = None):
  """The learner of `config.agent` (validated by the config) on `mesh`
  (default: every device)."""
  return _LEARNERS[config.agent](config, mesh)
