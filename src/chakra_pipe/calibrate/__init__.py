"""``chakra-pipe calibrate``: fit the simulator's network model to collectives measured here."""
