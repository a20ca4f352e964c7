"""evaluate --search KEY=VALUE: a checkpoint's search changed for one
evaluation, checked by the config's own rules."""

import pytest

from anakin_mz.runtime import restore
from anakin_mz.cli import main as cli_main
from anakin_mz.eval import report


def test_overrides_change_the_search_and_nothing_else():
  config = restore.load_agent("nannon").config
  # the shipped model's own search is Gumbel at 16 (docs/results/models.md)
  changed = report.with_search_overrides(config, ["backup=mean", "num_simulations=32"])
  playing = changed.playing_search
  assert (playing.backup, playing.num_simulations) == ("mean", 32)
  assert changed.search == config.search  # what self-play trained with stays
  assert changed.network == config.network and changed.train == config.train
  assert report.with_search_overrides(config, []) is config


@pytest.mark.parametrize(
  "item,message",
  [
    ("rooot=gumbel", "unknown key(s) search.rooot; valid keys in 'search': backup, chance_mode"),
    ("root=banana", "root must be one of ('puct', 'gumbel', 'expectimax'), got 'banana'"),
    ("search.root=puct", "expected KEY=VALUE with a key of the search section"),
    ("root", "expected KEY=VALUE"),
  ],
)
def test_bad_overrides_are_named(item, message):
  config = restore.load_agent("nannon").config
  with pytest.raises(ValueError) as e:
    report.with_search_overrides(config, [item])
  assert message in str(e.value)


def test_the_evaluation_uses_the_overridden_search(capsys):
  out = report.evaluate_checkpoint(
    "nannon",
    games=2,
    extra_policies=["search"],
    search_overrides=["num_simulations=2", "max_num_considered_actions=2"],
  )
  assert out["simulations"] == 2 and out["search_overrides"] == [
    "num_simulations=2",
    "max_num_considered_actions=2",
  ]
  assert 0.3 < out["exact"]["search_vs_optimal"] < 0.5
  assert cli_main(["evaluate", "--checkpoint", "nannon", "--search", "rooot=1"]) == 2
  assert "unknown key(s) search.rooot" in capsys.readouterr().err
