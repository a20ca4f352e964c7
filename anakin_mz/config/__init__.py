"""Experiment configuration: frozen dataclasses, loaded from YAML with
`key=value` overrides, validated up front and never mutated at run time.

A config file has five sections, each mapping onto one dataclass, and three
top-level settings:

    extends: nannon  # optional: the file this one changes (below)
    env:     {name: nannon, params: {...}}       # envs.make(name, **params)
    network: {...}                               # networks.NetworkConfig
    search:  {...}                               # search.SearchConfig
    loss:    {...}                               # loss.LossConfig
    train:   {...}                               # TrainConfig below
    seed: 0
    discount: 1.0    # the return's discount: the tree's edges and the value targets
    agent: ndmz      # a registered agent (`core.registry.names()`)
    <agent>: {...}   # the agent's own section, where it registers one
                     # (`ppo`, `tdlambda`): the keys no other agent reads
    play_search: {root: gumbel, ...}  # optional: keys of `search` changed for
                     # the search that plays (evaluate, play, export,
                     # tournaments, the periodic evaluation); self-play keeps
                     # `search` (`Config.playing_search`)

The discount is set once: `Config` hands it to the search (`search.discount`
is not a key of the file). A key that moved into an agent's own section
(`MOVED`: `train.td_lambda` is `tdlambda.td_lambda`) is refused under its
old name, naming the new one. A config saved with a run before either
change is in an older layout: `from_saved` raises `OlderLayout` for it, and
`anakin-mz migrate` converts its checkpoint or model file once (`legacy`).

`extends: PARENT` makes a file a change of another (`read`): the parent's
mapping with the file's merged over it, mappings key by key at every depth,
any other value (a number, a string, a list, null) replacing the parent's.
PARENT is a YAML file beside the file (with or without `.yaml`), else a
shipped config's name (or `kinds/NAME`); the parent may extend another in
turn, and a cycle is an error that names the files. So a variant holds only
what differs: `nannon_12_5_6.yaml` is `extends: nannon` and a dozen keys.
The merged mapping is checked as a whole, after the overrides.

Overrides use dotted keys: `train.batch_size=64`, `search.num_simulations=25`,
`env.params.points=12`. Values are parsed as YAML scalars; numeric fields
also take the spellings YAML 1.1 leaves as strings (`3e-4`, `1e9`), and
`1_000` and `.5` (`parse_number`); booleans are `true`/`false`.

A section's mapping becomes its dataclass through dacite
(`sections.build_section`), which the dataclass's own checks then validate.
Why dacite: it does this one step, mapping -> typed frozen dataclass, and
nothing else, so the dataclasses stay what the code passes around (hashable:
jit's static arguments) with their `__post_init__` checks. It refuses
unknown keys (`strict`), checks each value against its field's annotation (a
tuple's items too: `network.hidden: [16.5]` is refused, not truncated to 16;
and an Optional int, `search.max_depth`, takes the spellings of the other
ints), and its type hooks read our numeric spellings; its exceptions carry
the field, so `sections` words them as it always has (`unknown key(s)
train.batchsize; valid keys in 'train': ...`, `train.batch_size must be of type int (like its
default 256), got 'big'`). OmegaConf's structured configs type List and
Dict fields, not the Tuple fields that keep these dataclasses hashable, and
hand back its own mutable containers with its own messages to wrap;
ml_collections' ConfigDict is a mutable tree typed by its first values, in
place of the frozen dataclasses; tyro builds command lines from
dataclasses, not YAML files. None of them has a file-level `extends`, a few
lines here (`read`).

Where a config comes from (`resolve`, `default_source`, `load_for_env`): a
path to a YAML file, or the name of a config shipped in the package
(`anakin_mz/configs/NAME.yaml`, package data read through
`importlib.resources`, never through the checkout's layout). The default of
a registered env is its shipped `NAME.yaml`; a game without one (the adapted
`minatar-*` and `pgx-*` games) gets the generic base of its kind
(`env_kind`, `anakin_mz/configs/kinds/`).

The modules, each importing only those after it: `files` (`read` with
`extends`, overrides, where configs come from, `load`), `legacy` (the
readers of older saved layouts, run by `anakin-mz migrate`: `MOVED`, the
discount saved twice), `schema`
(`Config`, `TrainConfig`, `from_dict`, `from_saved`) and `sections` (dacite).
This package holds the names the rest of the code reads.
"""

from anakin_mz.config.files import (
  KIND_BASES,
  SHIPPED_FOLDERS,
  default_source,
  env_kind,
  load,
  load_for_env,
  parse_overrides,
  read,
  read_yaml,
  resolve,
  shipped,
  shipped_path,
)
from anakin_mz.config.legacy import MOVED, OlderLayout
from anakin_mz.config.schema import (
  LR_SCHEDULES,
  SEED_LAYOUTS,
  Config,
  TrainConfig,
  from_dict,
  from_saved,
)
from anakin_mz.config.sections import parse_number

__all__ = [
  "Config",
  "TrainConfig",
  "LR_SCHEDULES",
  "SEED_LAYOUTS",
  "MOVED",
  "OlderLayout",
  "KIND_BASES",
  "SHIPPED_FOLDERS",
  "from_dict",
  "from_saved",
  "load",
  "load_for_env",
  "default_source",
  "env_kind",
  "parse_overrides",
  "parse_number",
  "read",
  "read_yaml",
  "resolve",
  "shipped",
  "shipped_path",
]
