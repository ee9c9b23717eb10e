"""One TLS context for the tests' HTTP clients."""

from __future__ import annotations

import ssl

TEST_TLS = ssl.create_default_context()
"""Given to the tests' httpx clients as `verify`: httpx builds a fresh context per client
unless given one (loading the CA bundle each time, a large part of a test hub's start-up),
and these clients speak plain HTTP to 127.0.0.1 anyway."""
