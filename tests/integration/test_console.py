"""What the operator console calls besides the admin API it shares: a user's inbox read by
an admin, the live tail of a user's events, the recipients preview, the page itself, and
the publish-to-stream latency its overview shows (tests/e2e/test_console_browser.py drives
the page in Chromium)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

from notifyhub.api.schemas.rules import RuleIn
from notifyhub.api.schemas.topics import TopicMembersIn
from notifyhub.api.schemas.views import ViewIn
from support.sse import EventReader


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def _publish(hub: Any, key: str, **body: Any) -> str:
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def test_an_admin_reads_a_users_inbox_without_changing_it(
    hub: Any, admin_key: str, make_token: Any
) -> None:
    user = f"ivy-{secrets.token_hex(3)}"
    first = await _publish(hub, admin_key, recipients={"users": [user]}, title="one")
    second = await _publish(hub, admin_key, recipients={"users": [user]}, title="two")
    token = _auth(make_token(user))
    patched = await hub.client.patch(
        f"/v1/me/notifications/{first}", json={"pinned": True}, headers=token
    )
    assert patched.status_code == 200
    answer = await hub.client.get(f"/v1/admin/inbox?user={user}&limit=1", headers=_auth(admin_key))
    assert answer.status_code == 200
    page = answer.json()
    assert [i["id"] for i in page["items"]] == [first]  # pinned first, counted in the limit
    assert page["next_cursor"] is not None
    own = (await hub.client.get("/v1/me/notifications", headers=token)).json()
    assert [i["id"] for i in own["items"]] == [first, second]
    counts = (await hub.client.get("/v1/me/notifications/counts", headers=token)).json()
    assert (counts["unread"], counts["unseen"]) == (2, 2)  # nothing marked seen or read
    refused = await hub.client.get(f"/v1/admin/inbox?user={user}", headers=_auth(make_token(user)))
    assert refused.status_code == 401  # a user token is not an admin key


async def test_the_tail_streams_a_users_events_and_counts_as_one_of_their_streams(
    start_hub: Any, settings: Any, admin_key: str, make_token: Any
) -> None:
    limits = settings.limits.model_copy(update={"streams_per_user": 1})
    user = f"jay-{secrets.token_hex(3)}"
    async with start_hub(settings.model_copy(update={"limits": limits})) as hub:
        url = f"/v1/admin/tail?user={user}"
        async with hub.client.stream("GET", url, headers=_auth(admin_key)) as response:
            assert response.status_code == 200
            tail = EventReader(response)
            assert (await tail.next()).event == "counts"
            sent = await _publish(hub, admin_key, recipients={"users": [user]}, title="hi")
            event, _ = await tail.until("notification")
            assert event.data["id"] == sent and event.data["title"] == "hi"
            counts = await tail.next()
            assert counts.event == "counts" and counts.data["unread"] == 1
            own = await hub.client.get("/v1/me/stream", headers=_auth(make_token(user)))
            assert own.status_code == 429  # the tail holds the user's only stream
        metrics = (await hub.client.get("/metrics")).text
        observed = re.search(r"^notifyhub_publish_to_stream_seconds_count (\S+)$", metrics, re.M)
        assert observed is not None and float(observed[1]) >= 1


async def test_the_recipients_preview_counts_without_sending(
    hub: Any, admin_key: str, make_token: Any
) -> None:
    run = secrets.token_hex(3)
    group, users = f"crew-{run}", [f"u{i}-{run}" for i in range(3)]
    admin = _auth(admin_key)
    assert (await hub.client.put(f"/v1/admin/groups/{group}", headers=admin)).is_success
    change = {"add": users}
    added = await hub.client.post(f"/v1/admin/groups/{group}/members", json=change, headers=admin)
    assert added.is_success
    body = {"recipients": {"users": [users[0], "outsider"], "groups": [group]}}
    answer = await hub.client.post("/v1/admin/recipients", json=body, headers=admin)
    assert answer.status_code == 200
    assert answer.json() == {
        "tenant": "default",
        "users": 4,
        "sample": [users[0], "outsider", *users[1:]],
    }
    counts = await hub.client.get(
        "/v1/me/notifications/counts", headers=_auth(make_token(users[0]))
    )
    assert counts.json()["total"] == 0  # nothing was sent
    unknown = {"recipients": {"groups": [f"nobody-{run}"]}}
    refused = await hub.client.post("/v1/admin/recipients", json=unknown, headers=admin)
    assert refused.status_code == 422
    assert f"nobody-{run}" in refused.json()["detail"]
    empty = await hub.client.post("/v1/admin/recipients", json={"recipients": {}}, headers=admin)
    assert empty.status_code == 422


async def test_the_console_page_loads_only_its_own_files(hub: Any) -> None:
    page = await hub.client.get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "unsafe" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["referrer-policy"] == "no-referrer"
    assets = re.findall(r'(?:src|href)="(/[^"]+)"', page.text)
    assert sorted(assets) == ["/static/console.css", "/static/console.js"]
    for asset in assets:
        assert (await hub.client.get(asset)).status_code == 200
    assert "<script>" not in page.text and "style=" not in page.text


RULE = {
    "target_type": "post",
    "recipients": [
        {"relationship": "author", "title": "{{ actor.id }} commented on {{ target.id }}"},
        {"relationship": "follower", "obtain": "pull", "title": "t", "body": "{{ 1 // 0 }}"},
    ],
}


async def test_a_rule_preview_renders_its_templates_and_stores_nothing(
    hub: Any, admin_key: str
) -> None:
    name = f"preview-{secrets.token_hex(3)}"
    body = {
        "rule": RULE,
        "name": name,
        "actor": {"type": "user", "id": "alice"},
        "target": {"type": "post", "id": "p-9"},
        "data": {"excerpt": "hi"},
    }
    admin = _auth(admin_key)
    answer = await hub.client.post("/v1/admin/rules/preview", json=body, headers=admin)
    assert answer.status_code == 200, answer.text
    author, follower = answer.json()["recipients"]
    assert author == {
        "relationship": "author",
        "obtain": "push",
        "title": "alice commented on p-9",
        "body": "",
        "error": None,
    }
    assert follower["relationship"] == "follower" and follower["error"]  # division by zero
    stored = await hub.client.get(f"/v1/admin/rules/{name}", headers=admin)
    assert stored.status_code == 404
    broken = {**body, "rule": {**RULE, "recipients": [{"relationship": "x", "title": "{{ a"}]}}
    refused = await hub.client.post("/v1/admin/rules/preview", json=broken, headers=admin)
    assert refused.status_code == 422 and "recipients.0.title" in refused.json()["detail"]


CONSOLE_JS = Path(__file__).resolve().parents[2] / "src/notifyhub/static/console.js"


def _editor_fields(path: str) -> list[str]:
    """The fields the console's editor for `path` copies from a listed item into the
    textarea that its Save PUTs back (console.js `editor`, `pick`)."""
    found = re.search(rf'path: "{re.escape(path)}",\s*fields: \[([^\]]*)\]', CONSOLE_JS.read_text())
    assert found, path
    return re.findall(r'"([a-z_]+)"', found.group(1))


def test_each_console_editor_saves_every_field_it_picked() -> None:
    # The rules editor picked only target_type and recipients, so Save on a picked rule
    # dropped its channels, digest and escalation steps.
    for path, model in (
        ("/v1/admin/rules", RuleIn),
        ("/v1/admin/views", ViewIn),
        ("/v1/admin/topics", TopicMembersIn),
    ):
        assert sorted(_editor_fields(path)) == sorted(model.model_fields), path


async def test_a_rule_picked_from_the_list_and_saved_again_is_unchanged(
    hub: Any, admin_key: str
) -> None:
    admin = _auth(admin_key)
    name = f"whole-{secrets.token_hex(3)}"
    rule = {
        **RULE,
        "target_type": name,  # no other test's subscriptions see it
        "channels": ["inbox", "email"],
        "digest": {"key": "posts", "window_s": 900},
        "escalate": [{"after_s": 600, "unless": "read", "channel": "push"}],
    }
    url = f"/v1/admin/rules/{name}"
    assert (await hub.client.put(url, json=rule, headers=admin)).status_code == 201
    before = (await hub.client.get(url, headers=admin)).json()
    listed = await hub.client.get("/v1/admin/rules", params={"limit": 1000}, headers=admin)
    [item] = [r for r in listed.json()["rules"] if r["name"] == name]
    picked = {f: item[f] for f in _editor_fields("/v1/admin/rules") if f in item}
    assert (await hub.client.put(url, json=picked, headers=admin)).status_code == 200
    assert (await hub.client.get(url, headers=admin)).json() == before
