"""What each `route` verb does: plan, prices, jobs (deploy/preview/status/destroy), bootstrap,
init. Flows load inputs (config), gather offers (prices), run the core and the engine."""
