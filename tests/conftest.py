"""What every test session starts with."""

from __future__ import annotations

from router.config.datafiles import load_gpus

# The core reads no files: as every `route` command does through router.config, hand it the
# bundled GPU table (router/data/gpus.csv) before any test validates a job or a GPU name.
load_gpus()
