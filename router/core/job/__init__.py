"""The job (job.yaml) model, its problems as one-line messages, and its JSON Schema."""
