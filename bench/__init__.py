"""notifyhub benchmarks: `python -m bench` writes docs/benchmarks.md."""
