"""notifyhub: a notification hub with per-user Redis inboxes and live Server-Sent Events."""

from importlib.metadata import version

__version__ = version("notifyhub")
"""The installed distribution's version: pyproject.toml's `version` is its one source
(shown in `/healthz` and the OpenAPI document's `info.version`)."""
