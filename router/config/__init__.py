"""Loading at the edge: job and org-config files, the project, SPOTROUTE_HOME, package data."""
