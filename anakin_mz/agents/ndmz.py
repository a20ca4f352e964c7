"""Nondeterministic MuZero (`agent: ndmz`, the default): a learned model
with chance and turn order (`networks.Network`: h, g and f, with identity
and chance heads), searched by the NDMZ tree (`search.ndmz_search`) and
trained on K-step unrolls of its replay with NDMZ's loss (`loss.ndmz_loss`)
by the Anakin learner (`agents.replay_learner.Learner`).
"""

from __future__ import annotations

from anakin_mz.core import act
from anakin_mz.core.networks import Network
from anakin_mz.core import registry
from anakin_mz.agents.replay_learner import Learner

AGENT = registry.register(
  registry.AgentSpec(
    name="ndmz",
    learner=Learner,
    model=lambda config, env: Network(env, config.network),
    greedy=act.root_greedy,
    value=act.root_value,
    search=act.model_search,
    capabilities=registry.Capabilities(
      learned_model=True, ndmz_network=True, dynamics_tests=True, tree=True
    ),
  )
)
