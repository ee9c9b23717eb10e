"""notifyhub: a notification hub with per-user Redis inboxes and live Server-Sent Events."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """`__version__`: the installed distribution's version, pyproject.toml's `version`
    its one source (shown in `/healthz` and the OpenAPI document's `info.version`). Read
    on first use: importlib.metadata is slow to import, and `notifyhub --help` needs none."""
    if name == "__version__":
        from importlib.metadata import version

        found = version("notifyhub")
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
