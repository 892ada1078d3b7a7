"""Write the campaign plan (grid points, shards, provenance digest) from the merged Snakemake config."""

from chakra_pipe.sweep.campaign import Campaign

Campaign.from_config(snakemake.config).write(snakemake.output[0])  # noqa: F821 (injected by Snakemake)
