"""What every learned-model agent shares, below the config and the runtime:
the types (`types`), the value transform (`value_transform`), the NDMZ
networks (`networks`), the search (`search/`), the replay (`replay/`), the
loss (`loss`), the real game's lookahead (`lookahead`), how an agent acts
(`act`), self-play (`selfplay`), reanalyse (`reanalyse`), and the agent
registry (`registry`) that the agents register into and the layers above
read. It imports no layer above it (the import-linter contracts in
pyproject.toml)."""
