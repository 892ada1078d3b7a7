#!/usr/bin/env bash
# Runs once, inside the new environment, when Snakemake creates it. workflow/Snakefile sets
# CHAKRA_PIPE_SOURCE to the checkout it was started from, so the install is right whatever the working
# directory (--directory .test, a cluster scratch folder). Editable, so the environment follows the checkout.
set -euo pipefail
python -m pip install --editable "${CHAKRA_PIPE_SOURCE:?set by workflow/Snakefile}[torch]"
