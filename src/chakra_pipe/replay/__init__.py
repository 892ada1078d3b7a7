"""Replay Chakra rank sets on the devices at hand (gloo on CPUs, NCCL on GPUs) and measure them.

torch is imported only inside the rank processes and the launcher's run, never at package import,
so the plan checks and ``chakra-pipe --help`` work without it.
"""
