"""``chakra-pipe search``: every valid parallel layout of a model on N GPUs, memory-checked, simulated, ranked."""
