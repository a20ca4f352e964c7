"""Evaluation as a library: one match loop (`match`), opponents by spec
(`opponents`: the game's bots from `envs.bots`, or saved agents), the
checkpoint report (`report`), round robins with Elo (`tournament`), the NDMZ
paper's dynamics tests (`dynamics`) and the statistics they share (`stats`);
playing in the terminal (`play`), the drawn search tree (`search_tree`), the
learning curves (`plots`) and the hidden-state map (`hidden_map`). Saved
agents act through their registration (`core.registry`, `runtime.restore`).
The command lines (`anakin_mz.cli`) are thin shells over it."""
