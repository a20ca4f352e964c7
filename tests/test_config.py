"""Config loading: every shipped YAML loads; a config is found by path or by
name; every registered env has a default (its own, or its kind's); bad
input fails clearly."""

import os

import pytest

import envs
from anakin_mz import config as config_lib
from anakin_mz.config import files as config_files
from anakin_mz.config import legacy

# The shipped training configs.
CONFIGS = [config_lib.shipped_path(f"{name}.yaml") for name in config_lib.shipped()]
KIND_BASES = sorted(config_lib.shipped_path(base) for base in set(config_lib.KIND_BASES.values()))


def test_every_registered_env_has_a_config():
  names = {os.path.splitext(os.path.basename(p))[0] for p in CONFIGS}
  native = set(envs.registered(adapted=False))  # minatar-*, pgx-*: configs not yet
  assert native <= names, native - names


def _assert_every_key_commented(path):
  for line in open(path, encoding="utf-8"):
    stripped = line.strip()
    if stripped and not stripped.startswith("#") and ":" in stripped:
      head, _, rest = stripped.partition(":")
      if rest.strip():  # a key with a value
        assert "#" in rest, f"{path}: key {head!r} has no comment"


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_configs_load_and_round_trip(path):
  cfg = config_lib.load(path)
  name = os.path.splitext(os.path.basename(path))[0]
  # <env>.yaml, or <env>_<variant>.yaml (nannon_12_5_6.yaml)
  assert name == cfg.env or name.startswith(cfg.env + "_"), (name, cfg.env)
  again = config_lib.from_dict(cfg.to_dict())
  assert again == cfg
  _assert_every_key_commented(path)


@pytest.mark.parametrize("path", KIND_BASES, ids=os.path.basename)
def test_kind_bases_are_commented_and_hold_no_env(path):
  _assert_every_key_commented(path)
  with pytest.raises(ValueError, match="config needs `env"):
    config_lib.load(path)  # the env comes from `default_source`'s env.name=NAME


def test_a_config_is_a_path_or_a_shipped_name(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)  # names do not depend on the working directory
  path = config_lib.shipped_path("nannon_12_5_6.yaml")
  assert os.path.isfile(path)
  assert config_lib.resolve("nannon_12_5_6") == config_lib.resolve("nannon_12_5_6.yaml") == path
  assert dict(config_lib.load("nannon_12_5_6").env_params)["points"] == 12
  assert "nannon" in config_lib.shipped()
  mine = tmp_path / "mine.yaml"
  mine.write_text("env: {name: catch, params: {rows: 4}}\n")
  assert config_lib.resolve("mine.yaml") == "mine.yaml"  # a path wins
  assert dict(config_lib.load("mine.yaml").env_params)["rows"] == 4
  for bad in ("nosuch", "configs/nannon.yaml", str(tmp_path / "none.yaml")):
    with pytest.raises(ValueError) as e:
      config_lib.resolve(bad)
    assert f"config {bad!r} does not exist" in str(e.value)
    assert "shipped configs: breakthrough, carchess, catch," in str(e.value)


# Each registered env's default: its own file, or its kind's base.
DEFAULTS = {
  "breakthrough": (("two", "none", "planes"), "breakthrough.yaml"),
  "carchess": (("other", "explicit", "planes"), "carchess.yaml"),
  "catch": (("one", "explicit", "planes"), "catch.yaml"),
  "einstein": (("two", "explicit", "planes"), "einstein.yaml"),
  "minatar-asterix": (("one", "hidden", "planes"), "kinds/one_player_planes.yaml"),
  "minatar-breakout": (("one", "hidden", "planes"), "minatar-breakout.yaml"),
  "minatar-freeway": (("one", "hidden", "planes"), "kinds/one_player_planes.yaml"),
  "minatar-seaquest": (("one", "hidden", "planes"), "kinds/one_player_planes.yaml"),
  "minatar-space_invaders": (("one", "hidden", "planes"), "minatar-space_invaders.yaml"),
  "nannon": (("two", "explicit", "flat"), "nannon.yaml"),
  "pgx-2048": (("one", "hidden", "planes"), "kinds/one_player_planes.yaml"),
  "pgx-backgammon": (("two", "hidden", "flat"), "kinds/two_player_flat.yaml"),
  "pgx-connect_four": (("two", "none", "planes"), "kinds/two_player_planes.yaml"),
  "pgx-go_9x9": (("two", "none", "planes"), "kinds/two_player_planes.yaml"),
  "pgx-othello": (("two", "none", "planes"), "kinds/two_player_planes.yaml"),
  "pgx-tic_tac_toe": (("two", "none", "planes"), "kinds/two_player_planes.yaml"),
}


def test_the_default_table_covers_every_registered_env():
  assert sorted(DEFAULTS) == sorted(envs.registered())


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_every_registered_env_has_a_default_config_by_its_kind(name):
  kind, base = DEFAULTS[name]
  assert config_lib.env_kind(envs.make(name)) == kind
  path, overrides = config_lib.default_source(name)
  assert path == config_lib.shipped_path(base)
  cfg, loaded_from, everything = config_lib.load_for_env(name, None, ["seed=7"])
  assert cfg.env == name and cfg.seed == 7 and loaded_from == path
  assert everything == overrides + ("seed=7",)
  assert config_lib.load(loaded_from, everything) == cfg  # what a comparison reloads
  planes = kind[2] == "planes"
  if base.startswith("kinds/"):
    assert cfg.network.kind == ("conv" if planes else "mlp")
    assert cfg.discount == (1.0 if kind[0] == "two" else 0.97)


def test_a_kind_without_a_base_asks_for_a_config_path(monkeypatch):
  monkeypatch.setattr(config_files, "shipped", lambda: ())  # carchess: collaborative, no file
  with pytest.raises(ValueError, match=r"env 'carchess' has no config of its own.*--config PATH"):
    config_lib.default_source("carchess")


def test_a_config_for_another_env_is_refused():
  with pytest.raises(ValueError, match="--env=catch but config 'nannon' is for env 'nannon'"):
    config_lib.load_for_env("catch", "nannon")


def test_overrides_apply_and_validate():
  path = config_lib.shipped_path("catch.yaml")
  cfg = config_lib.load(
    path, ["train.batch_size=16", "search.num_simulations=4", "env.params.rows=6", "seed=3"]
  )
  assert cfg.train.batch_size == 16 and cfg.search.num_simulations == 4
  assert dict(cfg.env_params)["rows"] == 6 and cfg.seed == 3
  with pytest.raises(ValueError, match=r"unknown key\(s\) train.batchsize.*valid keys.*batch_size"):
    config_lib.load(path, ["train.batchsize=16"])
  with pytest.raises(ValueError, match="train.batch_size must be of type int"):
    config_lib.load(path, ["train.batch_size=big"])
  with pytest.raises(ValueError, match="batch_size must be >= 1"):
    config_lib.load(path, ["train.batch_size=0"])
  with pytest.raises(ValueError, match="identity_mode must be one of"):
    config_lib.load(path, ["search.identity_mode=roulette"])
  with pytest.raises(ValueError, match="unknown parameter.*rows=10"):
    config_lib.load(path, ["env.params.depth=3"])
  with pytest.raises(ValueError, match="unknown env 'chess'"):
    config_lib.load(path, ["env.name=chess"])
  with pytest.raises(ValueError, match="unknown config section"):
    config_lib.load(path, ["trian.batch_size=3"])
  with pytest.raises(ValueError, match="not of the form"):
    config_lib.load(path, ["train.batch_size"])
  # One discount, top level: the search and the value targets both read it.
  with pytest.raises(ValueError, match=r"search.discount is not a key.*one top-level"):
    config_lib.load(path, ["search.discount=0.9"])
  with pytest.raises(ValueError, match=r"discount must be in \(0, 1\]"):
    config_lib.load(path, ["discount=0"])
  one = config_lib.load(path, ["discount=0.9"])
  assert one.search.discount == one.discount == 0.9
  assert config_lib.from_dict(one.to_dict()) == one


def test_play_search_changes_the_search_that_plays_not_self_play(monkeypatch):
  from anakin_mz.core import registry
  from anakin_mz.eval import report
  from anakin_mz.runtime import restore

  path = config_lib.shipped_path("einstein.yaml")  # a file without play_search
  plain = config_lib.load(path)
  assert plain.play_search == () and plain.playing_search == plain.search
  assert "play_search" not in plain.to_dict()
  cfg = config_lib.load(
    path, ["play_search.root=gumbel", "play_search.value_bounds=[-2,2]", "discount=0.9"]
  )
  assert cfg.search == config_lib.load(path, ["discount=0.9"]).search  # self-play keeps it
  playing = cfg.playing_search
  assert playing.root == "gumbel" and playing.value_bounds == (-2.0, 2.0)
  assert playing.discount == 0.9 and playing.num_simulations == cfg.search.num_simulations
  assert cfg.to_dict()["play_search"] == {"root": "gumbel", "value_bounds": [-2.0, 2.0]}
  assert config_lib.from_dict(cfg.to_dict()) == cfg
  # --search overrides what plays, over play_search's own keys too.
  over = report.with_search_overrides(cfg, ["root=puct", "num_simulations=5"])
  assert over.playing_search.root == "puct" and over.playing_search.num_simulations == 5
  assert over.playing_search.value_bounds == (-2.0, 2.0)
  # A restored agent's players search with it.
  seen = []
  monkeypatch.setattr(
    registry.AgentSpec,
    "search_policy",
    lambda self, model, params, env, search: seen.append(search),
  )
  agent = restore.Agent(
    config=cfg, env=cfg.make_env(), network=None, params=None, step=0, meta={}, directory=""
  )
  agent.search_policy()
  assert seen == [playing]
  with pytest.raises(ValueError, match=r"unknown key\(s\) play_search.roots.*valid keys"):
    config_lib.load(path, ["play_search.roots=gumbel"])
  with pytest.raises(ValueError, match="root must be one of"):
    config_lib.load(path, ["play_search.root=best"])
  with pytest.raises(ValueError, match="play_search.discount is not a key"):
    config_lib.load(path, ["play_search.discount=0.5"])


def test_configs_saved_with_two_discounts_are_an_older_layout():
  path = config_lib.shipped_path("catch.yaml")
  today = config_lib.load(path, ["discount=0.9"])
  old = today.to_dict()
  old["search"]["discount"] = old["train"]["discount"] = old.pop("discount")
  with pytest.raises(config_lib.OlderLayout, match="one top-level discount"):
    config_lib.from_saved(old)
  with pytest.raises(ValueError, match=r"search.discount is not a key.*one top-level"):
    config_lib.from_dict(old)  # a config written today may not use it
  upgraded, notes = legacy.upgrade_saved(old)  # what `anakin-mz migrate` runs
  assert config_lib.from_saved(upgraded) == today and len(notes) == 1
  old["train"]["discount"] = 1.0
  with pytest.raises(ValueError, match=r"search.discount \(0.9\) differs from train.discount"):
    legacy.upgrade_saved(old)


def test_bad_files(tmp_path):
  with pytest.raises(ValueError, match="does not exist"):
    config_lib.load(str(tmp_path / "nope.yaml"))
  bad = tmp_path / "bad.yaml"
  bad.write_text("env: [unclosed")
  with pytest.raises(ValueError, match="not valid YAML"):
    config_lib.load(str(bad))
  bad.write_text("- just a list\n")
  with pytest.raises(ValueError, match="must hold a mapping"):
    config_lib.load(str(bad))
  bad.write_text("train: {batch_size: 4}\n")
  with pytest.raises(ValueError, match="config needs `env"):
    config_lib.load(str(bad))


def test_config_is_frozen():
  cfg = config_lib.load(config_lib.shipped_path("catch.yaml"))
  with pytest.raises(Exception):
    cfg.train.batch_size = 3  # type: ignore[misc]


def test_temperature_schedule_decays_over_its_span_then_holds():
  from anakin_mz.agents.replay_learner import Learner

  path = config_lib.shipped_path("catch.yaml")
  over = ["train.temperature_start=1.0", "train.temperature_end=0.2", "train.total_updates=1000"]
  whole = Learner(config_lib.load(path, over))
  fast = Learner(config_lib.load(path, over + ["train.temperature_decay_updates=100"]))
  assert float(whole.temperature(500)) == pytest.approx(0.6)
  assert float(whole.temperature(1000)) == pytest.approx(0.2)
  assert float(fast.temperature(50)) == pytest.approx(0.6)
  assert float(fast.temperature(100)) == pytest.approx(0.2)
  assert float(fast.temperature(700)) == pytest.approx(0.2)
  with pytest.raises(ValueError, match="temperature_decay_updates must be >= 0"):
    config_lib.load(path, ["train.temperature_decay_updates=-1"])


def test_learning_rate_schedule_keys_validate():
  path = config_lib.shipped_path("catch.yaml")
  with pytest.raises(
    ValueError, match=r"lr_schedule must be one of \('constant', 'cosine'\), got 'step'"
  ):
    config_lib.load(path, ["train.lr_schedule=step"])
  with pytest.raises(ValueError, match="learning_rate_end >= 0"):
    config_lib.load(path, ["train.learning_rate_end=-0.1"])
  cosine = config_lib.load(
    path,
    [
      "train.lr_schedule=cosine",
      "train.total_updates=100",
      "train.learning_rate=0.01",
      "train.learning_rate_end=0.001",
    ],
  )
  schedule = cosine.train.learning_rate_schedule()
  assert float(schedule(0)) == pytest.approx(0.01)
  assert float(schedule(100)) == pytest.approx(0.001)


def test_reanalyse_fraction_validates():
  path = config_lib.shipped_path("nannon.yaml")
  assert config_lib.load(path).train.reanalyse_fraction == 0.0  # off by default
  assert config_lib.load(path).train.reanalyse_rows == 0
  quarter = config_lib.load(path, ["train.reanalyse_fraction=.25", "train.batch_size=256"])
  assert quarter.train.reanalyse_rows == 64
  assert config_lib.from_dict(quarter.to_dict()) == quarter
  assert config_lib.load(path, ["train.reanalyse_fraction=1"]).train.reanalyse_rows == 256
  for bad in ("-0.1", "1.5"):
    with pytest.raises(ValueError, match=r"reanalyse_fraction must be in \[0, 1\] \(0: off\)"):
      config_lib.load(path, [f"train.reanalyse_fraction={bad}"])
  with pytest.raises(ValueError, match="reanalyse_fraction must be a finite number"):
    config_lib.load(path, ["train.reanalyse_fraction=.nan"])
  with pytest.raises(ValueError, match="reanalyse_fraction must be of type float"):
    config_lib.load(path, ["train.reanalyse_fraction=some"])
  # A positive fraction that rounds to no sample at all is not a silent "off".
  with pytest.raises(ValueError, match=r"rounds to 0 reanalysed samples.*at least 0.00195"):
    config_lib.load(path, ["train.reanalyse_fraction=0.001", "train.batch_size=256"])
  assert config_lib.load(path, ["train.reanalyse_fraction=0.002"]).train.reanalyse_rows == 1


def test_search_knobs_validate():
  path = config_lib.shipped_path("nannon.yaml")
  bad = [
    ("search.pb_c_init=-1", "pb_c_init must be a finite number >= 0.0, got -1.0"),
    ("search.pb_c_base=0", "pb_c_base must be a finite number > 0.0"),
    ("search.dirichlet_alpha=0", "dirichlet_alpha must be a finite number > 0.0"),
    ("search.dirichlet_fraction=1.5", r"dirichlet_fraction must be in \[0, 1\]"),
    ("search.num_simulations=0", "num_simulations must be an int >= 1"),
    ("search.max_depth=0", "max_depth must be None or an int >= 1"),
    ("search.root=alphazero", r"root must be one of \('puct', 'gumbel', 'expectimax'\)"),
    ("search.gumbel_scale=-1", "gumbel_scale must be a finite number >= 0"),
    ("search.completed_q_value_scale=0", "completed_q_value_scale must be a finite number > 0"),
    ("search.terminal_nodes=1", "search.terminal_nodes must be of type bool"),
  ]
  for override, match in bad:
    with pytest.raises(ValueError, match=match):
      config_lib.load(path, [override])
  # A Gumbel root cannot consider more moves than it simulates: refused, not
  # truncated (Nannon searches 16 simulations).
  with pytest.raises(
    ValueError, match=r"num_simulations=16 below max_num_considered_actions=32.*<= 16"
  ):
    config_lib.load(path, ["search.root=gumbel", "search.max_num_considered_actions=32"])
  with pytest.raises(ValueError, match="num_simulations=4 below max_num_considered_actions=16"):
    config_lib.load(path, ["search.root=gumbel", "search.num_simulations=4"])
  gumbel = config_lib.load(path, ["search.root=gumbel", "search.max_num_considered_actions=16"])
  assert gumbel.search.root == "gumbel"
  # What the YAML layer cannot say (booleans as ints, infinities) the
  # SearchConfig refuses itself.
  from anakin_mz.core.search import SearchConfig

  direct = [
    (dict(num_simulations=True), "num_simulations must be an int"),
    (dict(max_depth=True), "max_depth must be None or an int"),
    (dict(dirichlet_alpha=float("inf")), "dirichlet_alpha must be a finite number"),
    (dict(pb_c_init=float("nan")), "pb_c_init must be a finite number"),
    (dict(pb_c_base=float("inf")), "pb_c_base must be a finite number"),
    (dict(dirichlet_legal_only=1), "dirichlet_legal_only must be true or false"),
    (dict(terminal_nodes="no"), "terminal_nodes must be true or false"),
  ]
  for kwargs, match in direct:
    with pytest.raises(ValueError, match=match):
      SearchConfig(**kwargs)
  SearchConfig(pb_c_init=0.0, dirichlet_legal_only=True, terminal_nodes=False)


def test_td_lambda_is_the_tdlambda_agents_own_key():
  path = config_lib.shipped_path("nannon.yaml")
  cfg = config_lib.load(path, ["agent=tdlambda", "tdlambda.td_lambda=0.9"])
  assert cfg.agent_config.td_lambda == 0.9 and not hasattr(cfg.train, "td_lambda")
  assert config_lib.load(path, ["agent=tdlambda"]).agent_config.td_lambda == 0.7  # the paper's
  assert config_lib.from_dict(cfg.to_dict()) == cfg
  assert cfg.to_dict()["tdlambda"] == {"td_lambda": 0.9}
  with pytest.raises(ValueError, match=r"invalid 'tdlambda' config: .*td_lambda must be in \[0, 1"):
    config_lib.load(path, ["agent=tdlambda", "tdlambda.td_lambda=1.5"])
  # The old spelling names the new one, whatever the agent.
  for agent in ("tdlambda", "ndmz"):
    with pytest.raises(
      ValueError,
      match=r"train.td_lambda is not a key: it is agent tdlambda's own setting.*"
      r"tdlambda.td_lambda=0.5",
    ):
      config_lib.load(path, [f"agent={agent}", "train.td_lambda=0.5"])
  with pytest.raises(ValueError, match=r"section\(s\) \['tdlambda'\] belong to other agents"):
    config_lib.load(path, ["tdlambda.td_lambda=0.5"])  # agent ndmz


def test_configs_saved_with_train_td_lambda_are_an_older_layout():
  """Every config saved before td_lambda moved held `train.td_lambda`:
  `from_saved` refuses it (`OlderLayout`), and `legacy.upgrade_saved`
  (`anakin-mz migrate`) moves it into the tdlambda section, and drops it for
  the other agents, which never read it."""
  path = config_lib.shipped_path("nannon.yaml")
  for agent, value in (("tdlambda", 0.9), ("ndmz", 0.7), ("alphazero", 0.3)):
    today = config_lib.load(path, [f"agent={agent}"])
    old = today.to_dict()
    old.pop("tdlambda", None)
    old["train"]["td_lambda"] = value
    with pytest.raises(config_lib.OlderLayout, match="td_lambda moved to agent tdlambda"):
      config_lib.from_saved(old)
    saved = config_lib.from_saved(legacy.upgrade_saved(old)[0])
    if agent == "tdlambda":
      assert saved.agent_config.td_lambda == 0.9
      assert saved == config_lib.load(path, [f"agent={agent}", "tdlambda.td_lambda=0.9"])
    else:
      assert saved == today
    with pytest.raises(ValueError, match="train.td_lambda is not a key"):
      config_lib.from_dict(old)  # a config written today may not use it
  assert config_lib.from_saved(today.to_dict()) == today  # today's layout as it is


def _write(directory, name, text):
  path = directory / name
  path.write_text(text)
  return str(path)


def test_extends_merges_the_file_over_its_parent(tmp_path):
  base = _write(
    tmp_path,
    "base.yaml",
    "env: {name: catch, params: {rows: 6, columns: 5}}\n"
    "network: {hidden: [32, 32], latent_dim: 16}\n"
    "search: {num_simulations: 8, value_bounds: [-1, 1]}\n"
    "train: {batch_size: 64, total_updates: 100}\n",
  )
  child = _write(
    tmp_path,
    "child.yaml",
    "extends: base\n"  # beside it, without .yaml
    "env: {params: {rows: 8}}\n"  # mappings merge at every depth
    "network: {hidden: [8]}\n"  # a list replaces the parent's
    "search: {value_bounds: null}\n"  # null replaces too: the default
    "seed: 3\n",
  )
  parent, cfg = config_lib.load(base), config_lib.load(child)
  assert dict(cfg.env_params) == {**dict(parent.env_params), "rows": 8, "columns": 5}
  assert cfg.network.hidden == (8,) and cfg.network.latent_dim == 16
  assert cfg.search.num_simulations == 8 and cfg.search.value_bounds is None
  assert cfg.train == parent.train and cfg.seed == 3
  raw = config_lib.read(child)
  assert "extends" not in raw
  assert raw["env"] == {"name": "catch", "params": {"rows": 8, "columns": 5}}
  # Overrides apply over the merged file; its keys are checked after the merge.
  assert config_lib.load(child, ["network.hidden=[4,4]"]).network.hidden == (4, 4)
  typo = _write(tmp_path, "typo.yaml", "extends: base.yaml\ntrain: {batchsize: 32}\n")
  with pytest.raises(ValueError, match=r"unknown key\(s\) train.batchsize; valid keys in 'train'"):
    config_lib.load(typo)


def test_extends_chains_and_reaches_the_shipped_configs(tmp_path):
  _write(tmp_path, "mid.yaml", "extends: nannon\ntrain: {total_updates: 500}\n")
  sub = tmp_path / "sub"
  sub.mkdir()
  top = _write(sub, "top.yaml", "extends: ../mid.yaml\nsearch: {num_simulations: 4}\n")
  nannon = config_lib.load("nannon")
  cfg = config_lib.load(top)
  assert cfg.train.total_updates == 500 and cfg.search.num_simulations == 4
  assert cfg.train.batch_size == nannon.train.batch_size and cfg.network == nannon.network
  # A kind's base is a parent by its name too.
  kind = _write(tmp_path, "kind.yaml", "extends: kinds/two_player_flat\nenv: {name: nannon}\n")
  assert config_lib.load(kind).network.kind == "mlp"


def test_extends_refuses_cycles_and_unknown_parents(tmp_path):
  a = _write(tmp_path, "a.yaml", "extends: b.yaml\nseed: 1\n")
  _write(tmp_path, "b.yaml", "extends: a.yaml\nseed: 2\n")
  with pytest.raises(ValueError, match="config files extend each other in a cycle") as e:
    config_lib.load(a)
  assert "a.yaml -> " in str(e.value) and "b.yaml -> " in str(e.value)
  itself = _write(tmp_path, "self.yaml", "extends: self\n")
  with pytest.raises(ValueError, match=r"cycle: .*self.yaml -> .*self.yaml"):
    config_lib.load(itself)
  orphan = _write(tmp_path, "orphan.yaml", "extends: nanon\n")
  with pytest.raises(
    ValueError,
    match=r"extends 'nanon', which is neither a YAML file beside it nor a shipped config; "
    r"shipped configs: breakthrough, carchess, catch,",
  ):
    config_lib.load(orphan)
  for bad in ("[nannon]", "''"):
    with pytest.raises(ValueError, match="`extends` takes the name of a shipped config"):
      config_lib.load(_write(tmp_path, "bad.yaml", f"extends: {bad}\n"))


def test_nannon_12_5_6_is_a_short_change_of_nannon():
  path = config_lib.shipped_path("nannon_12_5_6.yaml")
  text = open(path, encoding="utf-8").read()
  assert "extends: nannon " in text and len(text.splitlines()) < 25
  cfg, base = config_lib.load("nannon_12_5_6"), config_lib.load("nannon")
  assert dict(cfg.env_params)["points"] == 12 and cfg.network.latent_dim == 256
  assert cfg.network.hidden == base.network.hidden and cfg.loss.l2 == base.loss.l2
