"""Start the ranks of a capture or a replay: on this machine, under torchrun or SLURM, or through srun.

One implementation for both stages so results, status and failure naming cannot drift between them
or between launchers (README: "Launchers").
"""
