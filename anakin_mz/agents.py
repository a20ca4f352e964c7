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
* `stochastic_muzero`: `StochasticMuZeroLearner`, the same self-play, replay
  and update loop with Stochastic MuZero's model (afterstates and learned
  chance codes), search (`mctx.stochastic_muzero_policy`) and loss, trained
  on unrolls over decision steps (`anakin_mz.stochastic_muzero`).

The learner's `network` is also what `act.search_policy` dispatches on, so a
restored agent plays with its own policy.
"""

from __future__ import annotations

from typing import Optional

from jax.sharding import Mesh

from anakin_mz.alphazero import TrueModel, alphazero_loss
from anakin_mz.anakin import Learner
from anakin_mz import mesh as mesh_lib
from anakin_mz import replay as replay_lib
from anakin_mz.config import AGENTS, Config
from anakin_mz.stochastic_muzero import StochasticNetwork, smz_loss
from anakin_mz.tdlambda import TDLambdaLearner


class AlphaZeroLearner(Learner):
  """`anakin.Learner` with the true model in the search and AlphaZero's loss."""

  def __init__(self, config: Config, mesh: Optional[Mesh] = None):
    super().__init__(config, mesh)
    self.network = TrueModel(self.env, config.network, discount=config.discount)

  def _loss(self, params, batch):
    return alphazero_loss(params, self.network, batch, self.config.loss)


class StochasticMuZeroLearner(Learner):
  """`anakin.Learner` with Stochastic MuZero's model (`act.search_policy`
  runs its search on it) and loss, on K-step unrolls over decision steps
  (`replay.sample_decisions`)."""

  def __init__(self, config: Config, mesh: Optional[Mesh] = None):
    super().__init__(config, mesh)
    self.network = StochasticNetwork(self.env, config.network)

  def _prepare(self, buffer):
    prepared = super()._prepare(buffer)
    return replay_lib.prepare_decisions(
      prepared, K=self.config.train.unroll_steps, discount=self.config.discount
    )

  def _sample(self, params, prepared, key):
    del params  # no reanalyse (the config refuses it)
    tc = self.config.train
    return replay_lib.sample_decisions(
      prepared,
      key,
      tc.batch_size,
      K=tc.unroll_steps,
      num_actions=self.env.num_actions,
      shard=mesh_lib.shard_index(),
      num_shards=self.num_devices,
    )

  def _loss(self, params, batch):
    return smz_loss(params, self.network, batch, self.config.loss)


_LEARNERS = {
  "ndmz": Learner,
  "alphazero": AlphaZeroLearner,
  "tdlambda": TDLambdaLearner,
  "stochastic_muzero": StochasticMuZeroLearner,
}
assert tuple(_LEARNERS) == AGENTS


def make_learner(config: Config, mesh: Optional[Mesh] = None):
  """The learner of `config.agent` (validated by the config) on `mesh`
  (default: every device)."""
  return _LEARNERS[config.agent](config, mesh)
