"""The machine's RabbitMQ broker for tests of `rabbitmq` deliveries: its URL, and a module
skip when none answers (except under `CI=true`, where `.ci/run` makes sure one runs)."""

from __future__ import annotations

import os
import socket

import pytest

AMQP_URL = os.environ.get("NOTIFYHUB_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


def _broker_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=1):
            return True
    except OSError:
        return False


def require_broker() -> None:
    """Call at a test module's top: skips it (and says why) when no broker answers."""
    if _broker_answers():
        return
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true needs RabbitMQ on 127.0.0.1:5672 (.ci/run starts one)")
    pytest.skip("no RabbitMQ broker answers on 127.0.0.1:5672", allow_module_level=True)
