"""Games and agents of another installed package (`envs.plugins`,
docs/extending.md): a tiny package, written to a temporary folder as pip
installs one (the modules beside a `<name>.dist-info` with its METADATA and
entry_points.txt), on the PYTHONPATH of `anakin-mz train`. No network."""

import os
import subprocess
import sys
import textwrap

import pytest
import tiny

import envs
from envs import plugins
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.core import registry

ANAKIN_MZ = os.path.join(os.path.dirname(sys.executable), "anakin-mz")

# A game of the project's own API (a small Catch under another name) and an
# agent (NDMZ's spec under another name), as a user's package writes them.
TINY_GAMES = """
import dataclasses

from envs.catch import Catch
from anakin_mz.agents import ndmz


class TinyCatch(Catch):
  name = "tiny_catch"
  default_params = {"rows": 4, "columns": 3}


AGENT = dataclasses.replace(ndmz.AGENT, name="tiny_ndmz")
"""


def install(root, distribution, modules, entry_points):
  """Writes package `distribution` into folder `root`, as pip installs one:
  `modules` (name -> source) and `<distribution>-0.1.dist-info`, with
  `entry_points` (group -> {name: "module:attr"})."""
  os.makedirs(root, exist_ok=True)
  for name, source in modules.items():
    with open(os.path.join(root, f"{name}.py"), "w") as f:
      f.write(textwrap.dedent(source))
  info = os.path.join(root, f"{distribution.replace('-', '_')}-0.1.dist-info")
  os.makedirs(info)
  with open(os.path.join(info, "METADATA"), "w") as f:
    f.write(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
  with open(os.path.join(info, "entry_points.txt"), "w") as f:
    for group, points in entry_points.items():
      f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n")
  return str(root)


def anakin_mz(*args, path, cwd):
  """`anakin-mz ARGS` in a fresh process on the CPU with `path` on its
  PYTHONPATH."""
  env = tiny.cpu_env(PYTHONPATH=os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
  return subprocess.run(
    [ANAKIN_MZ, *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env
  )


@pytest.fixture
def tiny_games(tmp_path):
  return install(
    tmp_path / "site",
    "tiny-games",
    {"tiny_games": TINY_GAMES},
    {
      plugins.GAMES: {"tiny_catch": "tiny_games:TinyCatch"},
      plugins.AGENTS: {"tiny_ndmz": "tiny_games:AGENT"},
    },
  )


def test_a_plugins_game_trains_with_its_agent_through_the_cli(tiny_games, tmp_path):
  # The game has no config of its own: the generic one of its kind (one
  # player, planes), with the tiny sizes.
  logdir = tmp_path / "run"
  out = anakin_mz(
    "train",
    "--env=tiny_catch",
    "--agent=tiny_ndmz",
    "--updates=4",
    f"--logdir={logdir}",
    "--no-progress",
    "--devices=1",
    *tiny.TINY,
    path=tiny_games,
    cwd=tmp_path,
  )
  assert out.returncode == 0, out.stdout + out.stderr
  directory = str(logdir / "checkpoints")
  assert ckpt.steps(directory) == (4,)
  config = ckpt.load_metadata(directory)["config"]
  assert config["env"]["name"] == "tiny_catch" and config["agent"] == "tiny_ndmz"


def test_an_unknown_env_lists_the_plugins_games(tiny_games, tmp_path):
  out = anakin_mz("train", "--env=tiny_ctach", path=tiny_games, cwd=tmp_path)
  assert out.returncode == 2, out.stdout + out.stderr
  assert "unknown env 'tiny_ctach'; registered envs:" in out.stderr
  assert "tiny_catch" in out.stderr and "Traceback" not in out.stderr


def test_a_broken_plugin_is_one_line_naming_it_and_its_distribution(tmp_path):
  path = install(
    tmp_path / "site",
    "broken-games",
    {"broken_games": "raise RuntimeError('no such board\\nsecond line')\n"},
    {plugins.GAMES: {"broken": "broken_games:Broken"}},
  )
  out = anakin_mz("train", "--env=catch", path=path, cwd=tmp_path)
  assert out.returncode == 2, out.stdout + out.stderr
  assert out.stderr.strip() == (
    "error: plugin 'broken' (anakin_mz.games = 'broken_games:Broken', distribution "
    "broken-games 0.1) failed to load: RuntimeError: no such board"
  ), out.stderr


@pytest.fixture
def site(tmp_path, monkeypatch):
  """A folder on sys.path for packages of this process; the registries
  have read the real entry points first (this test's loaders are fresh)."""
  envs.registered(), registry.names()
  root = tmp_path / "site"
  monkeypatch.syspath_prepend(str(root))
  yield root
  for module in ("bad_games", "ok_games"):
    sys.modules.pop(module, None)


BAD = """
import envs
from envs.catch import Catch


class Renamed(Catch):
  name = "tiny_other"


class Twin(Catch):
  name = "catch"


NOT_A_GAME = 3
"""


@pytest.mark.parametrize(
  "group,attribute,add,message",
  [
    (plugins.GAMES, "NOT_A_GAME", "games", "names 3, which is not an envs.Game subclass"),
    (
      plugins.GAMES,
      "Renamed",
      "games",
      "the entry point's name must be the game's: Renamed.name is 'tiny_other'",
    ),
    (plugins.GAMES, "Twin", "games", "game 'catch' is already registered"),
    (plugins.GAMES, "Missing", "games", "failed to load: AttributeError: module 'bad_games'"),
    (
      plugins.AGENTS,
      "Twin",
      "agents",
      "names <class 'bad_games.Twin'>, which is not an anakin_mz.core.registry.AgentSpec",
    ),
  ],
)
def test_a_bad_plugin_names_itself_and_what_is_wrong(site, group, attribute, add, message):
  name = "catch" if attribute == "Twin" and group == plugins.GAMES else "tiny_bad"
  install(site, "bad-games", {"bad_games": BAD}, {group: {name: f"bad_games:{attribute}"}})
  adder = envs.registry._add_plugin if add == "games" else registry._add_plugin
  loader = plugins.Plugins(group, adder)
  with pytest.raises(plugins.PluginError) as error:
    loader.load()
  text = str(error.value)
  origin = f"plugin {name!r} ({group} = 'bad_games:{attribute}', distribution bad-games 0.1)"
  assert text.startswith(origin) and message in text and "\n" not in text, text
  with pytest.raises(plugins.PluginError):  # every later query, not a half-loaded registry
    loader.load()
  assert "tiny_bad" not in envs.registered() and "tiny_bad" not in registry.names()


def test_a_plugin_loads_once_at_the_first_query(site):
  calls = []
  install(
    site, "ok-games", {"ok_games": "VALUE = 1\n"}, {"anakin_mz.test": {"a": "ok_games:VALUE"}}
  )
  loader = plugins.Plugins("anakin_mz.test", lambda name, obj: calls.append((name, obj)))
  assert calls == []  # nothing at construction (a registry's import)
  loader.load()
  loader.load()
  assert calls == [("a", 1)]
