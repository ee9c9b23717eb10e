"""Live streams: one Pub/Sub listener per process fanned out to bounded per-stream subscribers."""
