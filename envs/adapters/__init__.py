"""Adapters between our games and pgx / gymnax, both ways.

* `from_gymnax(name, **params)`: any gymnax env as an `envs.Env`
  (MinAtar registered as `minatar-<game>`);
* `from_pgx(name)`: pgx games as `envs.Env` (registered as `pgx-<id>`);
* `to_pgx(env)`, `to_gymnax(env)`: our games in their APIs.

gymnax and pgx are optional (the `gymnax` and `pgx` extras): the names
register without them, and building one raises an ImportError naming the
extra. Where chance hides inside the wrapped library's keyed step, see
`hidden.py`.
"""

from envs.adapters.gymnax_games import from_gymnax
from envs.adapters.pgx_games import from_pgx
from envs.adapters.to_gymnax import to_gymnax
from envs.adapters.to_pgx import to_pgx

__all__ = ["from_gymnax", "from_pgx", "to_gymnax", "to_pgx"]
