"""Jittable games with chance as an explicit player.

    import envs
    env = envs.make("catch", rows=10, columns=5)
    state = env.init(key)                 # may be a chance node
    state = env.step(state, action)       # one transition (action or outcome)
    state = env.step(state, action, key)  # ... then sample chance, as in pgx

See `envs/API.md` for the contract.
"""

from envs.core import CHANCE, PAYOFF_KINDS, TERMINAL, Env, Game, State, chance_outcome, raw_key
from envs.policy import OnePlyPolicy, Policy, legal_slots, random_policy
from envs.registry import default_params, make, register, registered

# Each import registers one game.
from envs import catch  # noqa: F401
from envs import carchess  # noqa: F401
from envs import nannon  # noqa: F401
from envs import einstein  # noqa: F401
from envs import breakthrough  # noqa: F401

# gymnax and pgx games (minatar-*, pgx-*), and our games in their APIs.
from envs.adapters import from_gymnax, from_pgx, to_gymnax, to_pgx

__all__ = [
  "CHANCE",
  "TERMINAL",
  "PAYOFF_KINDS",
  "Env",
  "Game",
  "State",
  "make",
  "register",
  "registered",
  "default_params",
  "chance_outcome",
  "raw_key",
  "Policy",
  "OnePlyPolicy",
  "legal_slots",
  "random_policy",
  "from_gymnax",
  "from_pgx",
  "to_gymnax",
  "to_pgx",
]
