"""Evaluation as a library: one match loop (`match`), opponents by spec
(`opponents`: the game's bots from `envs.bots`, or saved agents), the
checkpoint report (`report`), round robins with Elo (`tournament`), the NDMZ
paper's dynamics tests (`dynamics`) and the statistics they share (`stats`).
The scripts are thin command lines over it."""
