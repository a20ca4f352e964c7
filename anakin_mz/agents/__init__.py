"""The agents (`agent:` in a config). Each module here is one agent and
registers it (`core.registry.register`) when it is imported: its learner,
its model, its search and players, what it can play, its config section.
Importing this package registers them all, in the order below: the command
line, `anakin_mz`'s public names and the experiments do; the runtime and the
evaluation read the registry and import no agent (the import-linter
contracts in pyproject.toml).

`replay_learner` is no agent: it is the Anakin learner of the replay-based
agents (self-play, replay, reanalyse, K-step unrolls), which `ndmz`,
`alphazero` and `stochastic_muzero` train with.

* `ndmz`: NDMZ, a learned model with chance and turn order (the default).
* `alphazero`: AlphaZero, the same search with the real game as its model.
* `tdlambda`: TD(lambda) self-play of a value network, 1-ply expectimax play.
* `stochastic_muzero`: Stochastic MuZero, afterstates and learned chance codes.
* `ppo`: PPO, a model-free actor-critic for single-player games.

Adding an agent: its module here, and its name in the import below (the
order is the order of `registry.names()`). See docs/adding_an_agent.md.
"""

from anakin_mz.agents import ndmz, alphazero, tdlambda, stochastic_muzero, ppo

__all__ = ["ndmz", "alphazero", "tdlambda", "stochastic_muzero", "ppo"]
