"""The Anakin steps this process compiled, kept for the next run of the
same program (`compiled_step`): `run.train` and `run.train_seeds` step
through it.
"""

from __future__ import annotations

import collections
import json

import jax

from anakin_mz.runtime.mesh import OnMesh

# The steps this process compiled, newest last, by what makes the program:
# a learner is a pure function of its class, its config and its mesh, so a
# later `train` of an equal config on the same mesh (the next chunk of
# `compare`, a resumed run in a notebook) reuses the step instead of tracing
# it again, which alone takes seconds. The learner's `step` and `local_step`
# are in the key, so a method replaced at run time (a test's probe) is
# traced; so are the JAX settings that change the compiled program.
STEPS: "collections.OrderedDict[tuple, jax.stages.Compiled]" = collections.OrderedDict()
KEPT = 4
_COMPILE_SETTINGS = (
  "jax_disable_most_optimizations",
  "jax_enable_x64",
  "jax_default_matmul_precision",
)
# Settings of the loop around the step (the run loop reads them; no learner
# does), left out of the key so that runs differing only in when they
# evaluate, checkpoint or log, or in their seed (which draws the first
# state, `init_run`, outside the step), share a step.
_LOOP_ONLY = ("eval_every", "eval_games", "checkpoint_every", "log_every")


def _program(learner) -> tuple:
  """The classes and step methods that make `learner`'s program: its own,
  and a study's learner's (`seeds.SeedAxis.learner`)."""
  cls = type(learner)
  inner = getattr(learner, "learner", None)
  own = (cls, getattr(cls, "step", None), getattr(cls, "local_step", None))
  return own + (_program(inner) if inner is not None else ())


def _step_key(learner: OnMesh, state) -> tuple:
  leaves, tree = jax.tree.flatten(state)
  config = learner.config.to_dict()
  config["train"] = {k: v for k, v in config["train"].items() if k not in _LOOP_ONLY}
  del config["seed"]
  return (
    _program(learner),
    json.dumps(config, sort_keys=True, default=str),
    tuple(learner.mesh.devices.flat),
    tuple(learner.mesh.axis_names),
    tuple(jax.config.values[name] for name in _COMPILE_SETTINGS),
    tree,
    tuple((x.shape, str(x.dtype), getattr(x, "sharding", None)) for x in leaves),
  )


def compiled_step(learner: OnMesh, state):
  """`learner.jit_step` compiled for `state` (or this process's earlier
  compilation of the same program, `STEPS`); in a multi-process run,
  compiled afresh, once every process has compiled it. (The CPU collectives
  of several processes give a peer 30 s to reach the first collective;
  compile times differ by more than that on a loaded host, so the processes
  meet at the coordination service's barrier, which waits as long as
  compiling takes, first.)"""
  key = _step_key(learner, state) if jax.process_count() == 1 else None
  if key in STEPS:
    STEPS.move_to_end(key)
    return STEPS[key]
  step = learner.jit_step.lower(state).compile()
  if key is not None:
    STEPS[key] = step
    while len(STEPS) > KEPT:
      STEPS.popitem(last=False)
  if jax.process_count() > 1:
    from jax._src import (
      distributed,
    )  # the coordination client; no public barrier without a collective

    distributed.global_state.client.wait_at_barrier("anakin_mz_step_compiled", 60 * 60 * 1000)
  return step
