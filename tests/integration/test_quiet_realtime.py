"""Quiet hours in real time (issue 41 item 2's "within 60 s"): a user whose quiet window
ends at the next whole minute of the wall clock gets an e-mail published during it
after the window, not before, and within 60 s of its end.

Nothing is driven by hand: the hub runs its loops as in production (the channel worker
woken by the publish, the outbox dispatcher polling every
`NOTIFYHUB_DELIVERIES__DISPATCHER_INTERVAL_S`), the quiet-hours clock is the real one,
and a local aiosmtpd receives the mail. Schedules are whole minutes, so the test waits
up to ~75 s of wall time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from test_channels import Tenant, _auth, _publish, _trace
from test_quiet import make_tenant  # noqa: F401 (a fixture)

from notifyhub.domain.notification import to_rfc3339
from notifyhub.settings import Settings
from support.smtp import Smtp, smtp_settings

pytestmark = pytest.mark.slow

BERLIN = ZoneInfo("Europe/Berlin")
MIN_LEAD_S = 15.0
"""The window ends at the next whole minute, or the one after when less remains."""
WITHIN_S = 60.0


@pytest.fixture
def settings(settings: Settings, smtp: Smtp) -> Settings:
    """The production loops and intervals; only the SMTP server is the test's."""
    return smtp_settings(settings, smtp)


def _window_end(now: datetime) -> datetime:
    """The next whole minute at least `MIN_LEAD_S` away (in `now`'s zone)."""
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    if (end - now).total_seconds() < MIN_LEAD_S:
        end += timedelta(minutes=1)
    return end


def _arrived(smtp: Smtp, address: str) -> int:
    """Messages the SMTP server has accepted for `address`."""
    return sum(1 for rcpts, _ in smtp.handler.messages if address in rcpts)


async def test_an_email_held_for_quiet_hours_arrives_within_60_s_after_the_window(
    hub: Any,
    make_tenant: Callable[[], Awaitable[Tenant]],  # noqa: F811
    smtp: Smtp,
    record_property: Callable[[str, object], None],
) -> None:
    t = await make_tenant()
    address = "nora@quiet.test"
    end = _window_end(datetime.now(BERLIN))
    window = [(end - timedelta(hours=1)).strftime("%H:%M"), end.strftime("%H:%M")]
    body = {"email": address, "time_zone": "Europe/Berlin", "quiet": {"mon-sun": window}}
    put = await hub.client.put(f"/v1/admin/users/{t.name}/nora", json=body, headers=t.admin)
    assert put.status_code in (200, 201), put.text

    nid = await _publish(hub, t, ["nora"], channels=["inbox", "email"])
    me = _auth(hub.tokens.mint_user_token("nora", t.name, 3600))
    listed = (await hub.client.get("/v1/me/notifications", headers=me)).json()
    assert [n["id"] for n in listed["items"]] == [nid]  # the inbox is not held

    until = to_rfc3339(end)
    held = f"e-mailed, held for quiet hours until {until}"
    async with asyncio.timeout(10):  # the channel worker, woken by the publish
        while (await _trace(hub, t, nid)).get("nora", {}).get("email") != held:
            await asyncio.sleep(0.1)

    end_ts = end.timestamp()
    while time.time() < end_ts:  # nothing arrives before the window ends
        assert _arrived(smtp, address) == 0, "sent during quiet hours"
        await asyncio.sleep(0.05)
    while not _arrived(smtp, address) and time.time() < end_ts + WITHIN_S:
        await asyncio.sleep(0.05)
    lateness = time.time() - end_ts  # seen within a poll (50 ms) of its arrival
    assert _arrived(smtp, address) == 1, f"no e-mail within {WITHIN_S} s after the window"
    record_property("quiet_end_lateness_s", round(lateness, 3))
    print(f"held e-mail arrived {lateness:.2f} s after the quiet window's end")
    assert 0 <= lateness <= WITHIN_S
    await asyncio.sleep(1.0)  # and once only
    assert _arrived(smtp, address) == 1
