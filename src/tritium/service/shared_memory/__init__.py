"""Client system shared memory: the registry of regions and the mappings behind them."""
