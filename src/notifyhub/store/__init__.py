"""Redis: key names, Lua scripts, and the per-user inbox store."""
