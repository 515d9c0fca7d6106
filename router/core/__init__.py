"""The pure core: job and org-config models, GPU names, offers, catalog, cost models, planner,
review, stack-config rendering. No I/O: no files, sockets, subprocesses, clock, YAML or SDKs."""
