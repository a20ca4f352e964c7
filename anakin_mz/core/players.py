"""Who plays for a trained agent (`anakin-mz evaluate/play/export --player`,
an experiment spec's `player:`, a model file's `agent_kind`). In core, the
layer below cli, experiments and runtime, so that each of them reads the one
list instead of keeping its own."""

# Its greedy search, its greedy network policy, or its value head in an
# expectimax of `play_search.expectimax_depth` moves on the real game (a
# diagnostic of the value head without the policy head or the learned model).
PLAYERS = ("search", "greedy", "value")
DEFAULT_PLAYER = "search"
# `anakin-mz play` (a person against the agent) offers the first two: the
# value player needs the real game's expectimax, which play does not build.
INTERACTIVE_PLAYERS = ("search", "greedy")
