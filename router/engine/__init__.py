"""The Pulumi Automation API adapter (backend, workspace, config writes, locks, events) and
spotroute's records kept in the same backend (records.py)."""
