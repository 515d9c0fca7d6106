"""The clouds' view of a placement's nodes: is the spot capacity still there (route watch)."""
