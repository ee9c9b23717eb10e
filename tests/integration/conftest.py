"""Fixtures the e-mail and Web Push tests share: a local SMTP server (one per module)
and a local push service (one per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from support.pushservice import PushService
from support.smtp import Smtp, smtp_server


@pytest.fixture(scope="module")
def smtp() -> Iterator[Smtp]:
    with smtp_server() as server:
        yield server


@pytest.fixture
async def push() -> AsyncIterator[PushService]:
    service = await PushService().start()
    yield service
    await service.close()
