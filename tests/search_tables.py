"""Tabular test models of the NDMZ search, shared by `test_search.py` and
`test_search_gumbel.py`: a model is a dict of numpy tables indexed by row,
one row per node, with the next row of each (row, unified action) in
`next`; row 0 is a terminal sink."""

import numpy as np

from anakin_mz.core.types import ModelOutput

NEG = -1e4  # an identity logit that is never drawn


def tables(num_rows, num_actions, num_outcomes, num_players):
  """Empty tables (every row leads to row 0, a terminal sink)."""
  u = num_actions + num_outcomes
  identity = np.full((num_rows, num_players + 2), NEG, np.float32)
  identity[:, num_players + 1] = 0.0
  return dict(
    next=np.zeros((num_rows, u), np.int32),
    reward=np.zeros(num_rows, np.float32),
    value=np.zeros(num_rows, np.float32),
    policy=np.zeros((num_rows, num_actions), np.float32),
    chance=np.zeros((num_rows, num_outcomes), np.float32),
    identity=identity,
  )


def set_identity(t, row, cls):
  """Row `row`'s node is of identity class `cls` (a relative player,
  chance = num_players, terminal = num_players + 1)."""
  t["identity"][row] = NEG
  t["identity"][row, cls] = 0.0


def table_recurrent(params, rng_key, action, embedding):
  """The search's recurrent function over device tables; embedding = row."""
  del rng_key
  row = params["next"][embedding, action]
  return ModelOutput(
    reward=params["reward"][row],
    value=params["value"][row],
    policy_logits=params["policy"][row],
    chance_logits=params["chance"][row],
    identity_logits=params["identity"][row],
    embedding=row,
  )


def table_root(params, rows):
  """The search's root for table rows `rows` `[B]` (h then f): row `r`'s
  value, policy, chance and identity logits, its embedding the row."""
  b = rows.shape[0]
  return ModelOutput(
    reward=np.zeros(b, np.float32),
    value=params["value"][rows],
    policy_logits=params["policy"][rows],
    chance_logits=params["chance"][rows],
    identity_logits=params["identity"][rows],
    embedding=rows.astype(np.int32),
  )


def softmax(x):
  """float64 softmax of a 1-D array (the plain-Python references)."""
  x = np.asarray(x, np.float64)
  e = np.exp(x - x.max())
  return e / e.sum()
