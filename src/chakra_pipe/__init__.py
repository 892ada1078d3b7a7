"""chakra-pipe: Chakra execution traces from capture or generation to simulation, replay and reports."""

__version__ = "0.1.0"
