"""Background loops run inside the hub: the expiry cleaner and friends."""
