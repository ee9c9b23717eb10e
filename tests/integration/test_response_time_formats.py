"""Times in responses as the hub writes them everywhere: RFC 3339, UTC, milliseconds, `Z`.
These bodies' times were written with microseconds (or none) until they used `Instant`;
tests/unit/test_response_times.py keeps every response model to it."""

from __future__ import annotations

import re
import secrets
from typing import Any

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _times(body: dict[str, Any], *names: str) -> list[str]:
    """The named fields' values, each a time written with milliseconds."""
    for name in names:
        assert RFC3339_MS.match(body[name]), (name, body[name])
    return [body[name] for name in names]


async def _ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_admin_bodies_write_milliseconds(hub: Any, admin_key: str) -> None:
    admin, name = _auth(admin_key), f"times-{secrets.token_hex(3)}"
    made = await _ok(
        await hub.client.post(
            "/v1/admin/api-keys", json={"name": name, "scope": "consume"}, headers=admin
        ),
        201,
    )
    _times(made, "created_at")
    keys = await _ok(await hub.client.get("/v1/admin/api-keys", headers=admin))
    [listed] = [k for k in keys["keys"] if k["name"] == name]
    assert _times(listed, "created_at") == [made["created_at"]]
    entries = await _ok(await hub.client.get("/v1/admin/audit?limit=5", headers=admin))
    assert entries["entries"]
    for entry in entries["entries"]:
        _times(entry, "at")
    url = f"/v1/admin/users/default/times-{secrets.token_hex(3)}/revoke-tokens"
    _times(await _ok(await hub.client.post(url, headers=admin)), "not_before")


async def test_publish_and_delayed_bodies_write_milliseconds(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    publish = _auth(publish_key)
    note = {
        "recipients": {"users": [f"times-{secrets.token_hex(3)}"]},
        "title": "later",
        "deliver_at": "2099-11-30T01:02:03.456789Z",
    }
    accepted = await _ok(
        await hub.client.post("/v1/notifications", json=note, headers=publish), 202
    )
    assert _times(accepted, "scheduled_for") == ["2099-11-30T01:02:03.456Z"]
    pushed = await _ok(
        await hub.client.post(
            "/v1/delayed",
            json={"queue": f"times-{secrets.token_hex(3)}", "body": {}, "delay_ms": 60_000},
            headers=publish,
        ),
        201,
    )
    [due] = _times(pushed, "due_at")
    got = await _ok(await hub.client.get(f"/v1/delayed/{pushed['id']}", headers=publish))
    assert _times(got, "due_at") == [due]  # the same text from both

    now = {"recipients": {"users": ["times-now"]}, "title": "now"}
    nid = (await _ok(await hub.client.post("/v1/notifications", json=now, headers=publish), 202))[
        "id"
    ]
    trace = await hub.client.get(f"/v1/admin/notifications/{nid}/trace", headers=_auth(admin_key))
    _times(await _ok(trace), "created_at", "expires_at")


async def test_user_bodies_write_milliseconds(hub: Any, make_token: Any) -> None:
    me = _auth(make_token(f"times-{secrets.token_hex(3)}"))
    _times(await _ok(await hub.client.post("/v1/me/stream-tokens", headers=me)), "expires_at")
    view = {"filter": {"tags_any": ["mention"]}, "label": "Mentions"}
    made = await _ok(await hub.client.put("/v1/me/views/mentions", json=view, headers=me), 201)
    [updated] = _times(made, "updated_at")
    views = await _ok(await hub.client.get("/v1/me/views", headers=me))
    assert [v["updated_at"] for v in views["views"] if v["name"] == "mentions"] == [updated]
