"""On-device replay: a pure-JAX ring buffer of self-play steps, and the
K-step training targets of NDMZ (eq. 1) sampled from it.

Why not flashbax (0.1.3, checked): its trajectory buffer is batch-major and
samples fixed-length windows uniformly over all start times. We need starts
at decision steps only, targets that stop at the episode's end (absorbing
past it), Monte-Carlo returns that look to the episode's end however far it
is, bootstrapping at truncation and at the write head, and a point of view
that depends on the start's mover. That is target making over the whole lane,
not windowing, so flashbax would only store arrays for us; this module does
that in a few lines and keeps every index rule in one place.

Layout: `BufferState.data` is a `Transition` with leading axes `[L, B]`
(time-major, one column per self-play lane, L = capacity in time steps). Each
lane is a ring of its own: `write[b]` is its next slot and `count[b]` its
number of written steps, so its logical time order is
`(write[b] - count[b]) % L, ...` up to `write[b] - 1`. A chunk `[T, B]` is
written into all lanes at once; with `drop_invalid=True` only each lane's
valid steps are written, packed in time order, so lanes that played different
numbers of transitions (self-play that skips the search at chance nodes)
leave no padding between chunks.

Targets (see `sample`), all from the point of view of the player to move at
the start step t (the "root mover", `anakin_mz.core.types`):

* value z_{t+k}: the discounted sum of rewards from t+k to the episode's end
  (`td_steps=0`, the default), or the n-step return bootstrapped from the
  search value of the first decision step at or after t+k+n. Where the data
  stops before the episode ends -- truncation (the env gives no value there)
  or the write head (the game goes on) -- the tail is replaced by the search
  value of the last decision step before the stop.
* reward u_{t+k}, identity of the next mover (relative player, chance or
  terminal), choice policy (search visits, masked off-turn) and chance policy
  (the game's probabilities, masked at decision steps).
* past the end of the episode: identity terminal, reward 0, value 0, both
  policy masks off, and a uniformly random unified action is fed to g.

A start t is sampled only if it is a valid decision step and the K steps after
it are known: the episode ends within them, or t+K is written in the same
lane. So no sample reads across the write head or into unwritten slots.

Modules: `buffer` stores (`Transition`, `BufferState`, `add`), `targets`
derives the whole buffer's targets once per chunk (`prepare`), `sampling`
draws batches from them (`sample_starts`, `targets_at`). Stochastic MuZero's
unrolls over decision steps are its own (`agents.stochastic_muzero`).

Cost: `prepare` derives the targets of the whole buffer with parallel scans
(O(L B P) work, no Python loop); `sample_prepared` then gathers N x (K+1)
entries. `sample` does both; the learner prepares once per self-play chunk
and draws all of that chunk's batches from it. For a
256 x 128 Nannon buffer, batch 256, K=6 that is ~22 ms beside ~145 ms for one
gradient of the paper's MLP on a 2-core CPU
(`pytest -s -m slow tests/test_replay.py -k costs`).
"""

from anakin_mz.core.replay.buffer import (
  Transition,
  BufferState,
  example_transition,
  init_buffer,
  add,
)
from anakin_mz.core.replay.targets import Prepared, prepare, value_targets, start_mask, can_sample
from anakin_mz.core.replay.sampling import (
  Batch,
  check_batch,
  Starts,
  sample,
  sample_prepared,
  sample_starts,
  starts_everywhere,
  targets_at,
)

__all__ = [
  "Transition",
  "BufferState",
  "example_transition",
  "init_buffer",
  "add",
  "Prepared",
  "prepare",
  "value_targets",
  "start_mask",
  "can_sample",
  "Batch",
  "check_batch",
  "Starts",
  "sample",
  "sample_prepared",
  "sample_starts",
  "starts_everywhere",
  "targets_at",
]
