"""Loading at the edge: job files (and SkyPilot tasks), org config, the project, SPOTROUTE_HOME,
package data."""
