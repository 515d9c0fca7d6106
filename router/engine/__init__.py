"""The Pulumi Automation API adapter: backend, workspace, config writes, locks, events."""
