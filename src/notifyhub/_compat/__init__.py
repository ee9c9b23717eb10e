"""Every use of another library's internals, one module per library, each fast path on only
for the versions it is tested with (else a plain one on public API).

Nothing here imports a notifyhub layer: every layer may import from here. Each module picks
its implementation once, when imported; the rest of the hub binds what it picked.
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

log = logging.getLogger(__name__)

_told: set[str] = set()


def installed(distribution: str) -> str | None:
    """The installed version of `distribution`, None when it is not installed."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def in_range(found: str | None, tested: str) -> bool:
    """Whether version `found` is within `tested` (a specifier such as ">=1.2,<1.4")."""
    if found is None:
        return False
    try:
        return Version(found) in SpecifierSet(tested)
    except InvalidVersion:
        return False


def plain(library: str, reason: str) -> None:
    """Log, once per library, that its fast path is off and why."""
    if library not in _told:
        _told.add(library)
        log.warning("%s: %s; using the plain implementation (public API only)", library, reason)
