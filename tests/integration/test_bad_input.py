"""RELIABILITY.md's bad inputs and attacks over a real server: the ones no other test covers.

SECURITY.md maps every item of that list to the test that proves it (here or elsewhere).
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import struct
import time
from typing import Any

import jwt
import orjson
import pytest

from notifyhub.settings import Settings, StreamSettings

SEND_TIMEOUT_S = 1.0


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A short send timeout, so a stuck reader is dropped within the test."""
    stream = StreamSettings(send_timeout_s=SEND_TIMEOUT_S)
    return settings.model_copy(update={"stream": stream})


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _unique(name: str) -> str:
    return f"{name}-{secrets.token_hex(3)}"


async def _publish(hub: Any, key: str, users: list[str], **fields: Any) -> str:
    body = {"recipients": {"users": users}, "title": fields.pop("title", "hello"), **fields}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(key))
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _assert_problem(response: Any, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"


# --- identity comes from the token -------------------------------------------------


async def test_identity_comes_from_the_token_only(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    alice, bob = _unique("alice"), _unique("bob")
    mine = await _publish(hub, publish_key, [alice])
    await _publish(hub, publish_key, [bob])
    await _publish(hub, publish_key, [alice], tenant="acme")
    headers = _auth(make_token(alice))
    for query in (f"?user={bob}", "?tenant=acme", f"?sub={bob}&tenant_id=acme"):
        page = await hub.client.get(f"/v1/me/notifications{query}", headers=headers)
        assert [i["id"] for i in page.json()["items"]] == [mine], query
        counts = await hub.client.get(f"/v1/me/notifications/counts{query}", headers=headers)
        assert counts.json()["total"] == 1


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/me/notifications/read-all", {"user": "bob"}),
        ("POST", "/v1/me/notifications/read-all", {"tenant": "acme"}),
        ("POST", "/v1/me/notifications/bulk", {"ids": ["0" * 26], "read": True, "user": "b"}),
        ("PUT", "/v1/me/preferences", {"categories": {}, "tenant": "acme"}),
        (
            "DELETE",
            "/v1/me/subscriptions",
            {"rule": "r", "target": {"type": "t", "id": "1"}, "user": "bob"},
        ),
    ],
)
async def test_identity_fields_in_bodies_are_422(
    hub: Any, make_token: Any, method: str, path: str, body: dict[str, Any]
) -> None:
    headers = _auth(make_token(_unique("carol")))
    response = await hub.client.request(method, path, json=body, headers=headers)
    _assert_problem(response, 422)
    assert "user" in response.text or "tenant" in response.text


# --- numbers and booleans are JSON numbers and booleans -------------------------------

_NOTE = {"recipients": {"users": ["strict-nobody"]}, "title": "t"}
_DEFINITION = {"url": "https://example.com/hook"}
_STRICT_CASES: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("PATCH", "/v1/me/notifications/{id}", "user", {"snooze": "3600"}, "snooze"),
    ("PATCH", "/v1/me/notifications/{id}", "user", {"snooze": 3600.0}, "snooze"),
    ("PATCH", "/v1/me/notifications/{id}", "user", {"snooze": True}, "snooze"),
    ("PATCH", "/v1/me/notifications/{id}", "user", {"read": "true"}, "read"),
    ("PATCH", "/v1/me/notifications/{id}", "user", {"archived": 1}, "archived"),
    ("PATCH", "/v1/me/notifications/{id}", "user", {"pinned": "false"}, "pinned"),
    ("POST", "/v1/me/notifications/bulk", "user", {"ids": ["{id}"], "read": "true"}, "read"),
    ("PUT", "/v1/me/preferences", "user", {"categories": {"c": {"inbox": "false"}}}, "inbox"),
    ("PUT", "/v1/me/preferences", "user", {"categories": {"c": {"push": 0}}}, "push"),
    ("POST", "/v1/notifications", "publish", {**_NOTE, "ttl": "3600"}, "ttl"),
    ("POST", "/v1/notifications", "publish", {**_NOTE, "delay": "60"}, "delay"),
    (
        "POST",
        "/v1/notifications",
        "publish",
        {**_NOTE, "thread_key": "k", "thread_window_s": "60"},
        "thread_window_s",
    ),
    ("POST", "/v1/delayed", "publish", {"queue": "q", "body": {}, "delay_ms": "1000"}, "delay_ms"),
    ("POST", "/v1/delayed", "publish", {"queue": "q", "body": {}, "priority": "5"}, "priority"),
    ("POST", "/v1/delayed", "publish", {"queue": "q", "body": {}, "ttl_ms": "30000"}, "ttl_ms"),
    (
        "PUT",
        "/v1/admin/delivery-definitions/strict",
        "admin",
        {**_DEFINITION, "timeout_s": "5"},
        "timeout_s",
    ),
    (
        "PUT",
        "/v1/admin/delivery-definitions/strict",
        "admin",
        {**_DEFINITION, "max_retries": "3"},
        "max_retries",
    ),
    (
        "PUT",
        "/v1/admin/delivery-definitions/strict",
        "admin",
        {**_DEFINITION, "need_confirm": "true"},
        "need_confirm",
    ),
    (
        "PUT",
        "/v1/admin/delivery-definitions/strict",
        "admin",
        {**_DEFINITION, "max_confirm_delay_s": "60"},
        "max_confirm_delay_s",
    ),
    (
        "PUT",
        "/v1/admin/delivery-definitions/strict",
        "admin",
        {**_DEFINITION, "rotate_secret": 1},
        "rotate_secret",
    ),
    (
        "PUT",
        "/v1/admin/delivery-definitions/strict",
        "admin",
        {**_DEFINITION, "alert": {"trigger": "after_n", "after_n": "3"}},
        "after_n",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "who", "body", "field"),
    _STRICT_CASES,
    ids=[f"{c[0]} {c[1]} {orjson.dumps(c[3]).decode()}" for c in _STRICT_CASES],
)
async def test_numbers_and_booleans_in_strings_are_422_naming_the_field(
    hub: Any,
    publish_key: str,
    admin_key: str,
    make_token: Any,
    method: str,
    path: str,
    who: str,
    body: dict[str, Any],
    field: str,
) -> None:
    """`{"snooze": "3600"}` is refused as `{"archived": "yes"}` is: a number must be a JSON
    number, a boolean a JSON boolean; nothing is converted, nothing changes."""
    user = _unique("strict")
    mine = await _publish(hub, publish_key, [user])
    key = {"user": make_token(user), "publish": publish_key, "admin": admin_key}[who]
    sent = orjson.loads(orjson.dumps(body).replace(b"{id}", mine.encode()))
    url = path.replace("{id}", mine)
    response = await hub.client.request(method, url, json=sent, headers=_auth(key))
    _assert_problem(response, 422)
    assert field in response.json()["detail"], response.text
    item = await hub.client.get(f"/v1/me/notifications/{mine}", headers=_auth(make_token(user)))
    shown = item.json()
    assert (shown["status"], shown["archived"], shown["pinned"]) == ("unread", False, False)
    assert shown["snoozed_until"] is None
    if path == "/v1/notifications":
        counts = await hub.client.get(
            "/v1/me/notifications/counts", headers=_auth(make_token("strict-nobody"))
        )
        assert counts.json()["total"] == 0


# --- tokens -------------------------------------------------------------------------


def _claims(**overrides: Any) -> dict[str, Any]:
    return {"sub": "dave", "aud": "notifyhub", "exp": int(time.time()) + 600, **overrides}


def _unsigned(payload: dict[str, Any]) -> str:
    return jwt.encode(payload, key=None, algorithm="none")  # type: ignore[arg-type]


def _bad_tokens(secret: str) -> dict[str, str]:
    no_exp = {k: v for k, v in _claims().items() if k != "exp"}
    return {
        "alg none": _unsigned(_claims()),
        "expired": jwt.encode(_claims(exp=int(time.time()) - 5), secret, algorithm="HS256"),
        "missing exp": jwt.encode(no_exp, secret, algorithm="HS256"),
        "wrong aud": jwt.encode(_claims(aud="someone-else"), secret, algorithm="HS256"),
        "wrong key": jwt.encode(_claims(), "k" * 40, algorithm="HS256"),
        "no sub": jwt.encode(_claims(sub=None), secret, algorithm="HS256"),
        "sub and a newline": jwt.encode(_claims(sub="dave\n"), secret, algorithm="HS256"),
        "tenant and a newline": jwt.encode(_claims(tenant="default\n"), secret, algorithm="HS256"),
        "garbage": "not.a.jwt",
    }


async def test_bad_user_tokens_are_401(hub: Any, settings: Settings) -> None:
    assert settings.jwt_secret is not None
    for name, token in _bad_tokens(settings.jwt_secret.get_secret_value()).items():
        for path in ("/v1/me/notifications", "/v1/me/stream"):
            response = await hub.client.get(path, headers=_auth(token))
            _assert_problem(response, 401)
            assert response.headers["www-authenticate"] == "Bearer", name
    for header in ("Basic dXNlcjpwYXNz", "Bearer", "token abc", "Bearer a b"):
        response = await hub.client.get("/v1/me/notifications", headers={"Authorization": header})
        _assert_problem(response, 401)


async def test_a_tenant_claim_with_a_trailing_newline_is_401(hub: Any, settings: Settings) -> None:
    """The claim is matched whole: `default\n` once passed (rows of a tenant no API key can
    name), and 64 characters and a newline overflowed the tenant columns (a 500)."""
    assert settings.jwt_secret is not None
    secret = settings.jwt_secret.get_secret_value()
    requests = [
        ("GET", "/v1/me/notifications", None),
        ("PUT", "/v1/me/views/x", {"filter": {"tags_any": ["a"]}}),
        ("PUT", "/v1/me/preferences", {"categories": {"a": {"inbox": True}}}),
    ]
    for tenant in ("default\n", "t" * 64 + "\n"):
        token = jwt.encode(_claims(tenant=tenant), secret, algorithm="HS256")
        for method, path, body in requests:
            response = await hub.client.request(method, path, json=body, headers=_auth(token))
            _assert_problem(response, 401)
            assert response.json()["detail"] == "invalid `tenant` claim", (tenant, path)


async def test_stream_token_mints_nothing(hub: Any, make_token: Any) -> None:
    minted = await hub.client.post("/v1/me/stream-tokens", headers=_auth(make_token("erin")))
    stream_token = minted.json()["token"]
    again = await hub.client.post("/v1/me/stream-tokens", headers=_auth(stream_token))
    _assert_problem(again, 401)
    as_header = await hub.client.get("/v1/me/stream", headers=_auth(stream_token))
    _assert_problem(as_header, 401)


# --- bodies -------------------------------------------------------------------------


async def _raw_request(hub: Any, head: str, body: list[bytes]) -> tuple[int, bytes]:
    """Send a request head and some body bytes on a bare connection, then read the answer.

    The server refuses oversized bodies without reading them; a client that kept on
    writing 10 MB would only see its connection reset, so we stop early and listen.
    """
    host, port = hub.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.encode())
        for chunk in body:
            writer.write(chunk)
            await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 10)
        rest = await asyncio.wait_for(reader.read(65536), 10)
        return int(status_line.split()[1]), rest
    finally:
        writer.close()


def _head(path: str, key: str, extra: str) -> str:
    return (
        f"POST {path} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    )


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def test_chunked_body_without_content_length_is_413(
    hub: Any, publish_key: str, settings: Settings
) -> None:
    cap = settings.limits.max_body_bytes
    start = b'{"recipients": {"users": ["x"]}, "title": "'
    filler = cap + 1 - len(start)  # one byte over the cap, and no final 0-chunk
    chunks = [_chunk(start)] + [_chunk(b"x" * 65536) for _ in range(filler // 65536)]
    chunks.append(_chunk(b"x" * (filler % 65536)))
    head = _head("/v1/notifications", publish_key, "Transfer-Encoding: chunked\r\n")
    status, rest = await _raw_request(hub, head, chunks)
    assert status == 413
    assert b"application/problem+json" in rest


async def test_deeply_nested_json_is_422(hub: Any, publish_key: str, make_token: Any) -> None:
    deep = b'{"recipients": {"users": ["x"]}, "title": "t", "data": {"a": ' + b"[" * 100_000
    headers = {**_auth(publish_key), "content-type": "application/json"}
    response = await hub.client.post("/v1/notifications", content=deep, headers=headers)
    _assert_problem(response, 422)
    assert "nested deeper" in response.json()["detail"]
    user = {**_auth(make_token("frank")), "content-type": "application/json"}
    prefs = b'{"categories": ' + b'{"a": ' * 50 + b"1" + b"}" * 51
    _assert_problem(await hub.client.put("/v1/me/preferences", content=prefs, headers=user), 422)


async def test_a_million_recipients_is_refused_before_any_work(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    first = _unique("many")
    users = [first] + [f"u{i}" for i in range(1, 1_000_000)]
    body = {"recipients": {"users": users}, "title": "everyone"}
    encoded = orjson.dumps(body)  # ~9 MB: refused on its declared length, unread
    head = _head("/v1/notifications", publish_key, f"Content-Length: {len(encoded)}\r\n")
    status, _ = await _raw_request(hub, head, [encoded[:4096]])
    assert status == 413
    body = {"recipients": {"users": users[:10_001]}, "title": "everyone"}
    many = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    _assert_problem(many, 422)  # under the size cap, over the per-request list limit
    assert "recipients.users" in many.json()["detail"]
    counts = await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(first)))
    assert counts.json()["total"] == 0


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/notifications", {"recipients": {"users": ["a"]}, "title": "esc \x1b[31m red"}),
        ("/v1/notifications", {"recipients": {"users": ["a"]}, "title": "bell \x07"}),
        ("/v1/notifications", {"recipients": {"users": ["a"]}, "title": "t", "body": "nul \x00"}),
        ("/v1/notifications", {"recipients": {"users": ["a\x00b"]}, "title": "t"}),
        ("/v1/notifications", {"recipients": {"users": ["a"]}, "title": "t", "source": "s\x85"}),
        (
            "/v1/notifications",
            {"recipients": {"users": ["a"]}, "title": "t", "actor": {"type": "u", "id": "\x00"}},
        ),
        (
            "/v1/notifications",
            {"recipients": {"users": ["a"]}, "title": "t", "action_url": "javascript:alert(1)"},
        ),
        (
            "/v1/relationships",
            {"user": "a", "relationship": "author", "target": {"type": "doc\x00", "id": "1"}},
        ),
        (
            "/v1/admin/rules/r1",
            {"target_type": "doc", "recipients": [{"relationship": "author", "title": "hi \x00"}]},
        ),
        ("/v1/admin/groups/g1/members", {"add": ["ok", "tab\tinside"]}),
        # JSON kept in PostgreSQL's jsonb (scheduled and delayed bodies) cannot hold NUL.
        (
            "/v1/notifications",
            {"recipients": {"users": ["a"]}, "title": "t", "delay": 60, "data": {"k": "nul \x00"}},
        ),
        ("/v1/delayed", {"queue": "t", "delay_ms": 1000, "body": {"k\x00": 1}}),
        ("/v1/delayed", {"queue": "t", "delay_ms": 1000, "body": [1e30]}),
    ],
)
async def test_nul_and_control_characters_are_422(
    hub: Any, admin_key: str, path: str, body: dict[str, Any]
) -> None:
    method = "PUT" if path.startswith("/v1/admin/rules") else "POST"
    response = await hub.client.request(method, path, json=body, headers=_auth(admin_key))
    _assert_problem(response, 422)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/admin/users/default/%FF",  # an admin read of user "\ufffd" before
        "/v1/admin/users/default/ok%C3%28/inbox",
        "/v1/admin/groups/g%FF",
    ],
)
async def test_a_path_that_is_not_utf8_is_422(hub: Any, admin_key: str, path: str) -> None:
    """A percent-escape that decodes to invalid UTF-8 is refused, not read as U+FFFD (two
    different byte strings would name one user); a real U+FFFD, escaped, stays a name."""
    response = await hub.client.get(path, headers=_auth(admin_key))
    _assert_problem(response, 422)
    assert "path: not UTF-8" in response.json()["detail"]
    real = await hub.client.get("/v1/admin/users/default/%EF%BF%BD", headers=_auth(admin_key))
    assert real.status_code == 200, real.text
    assert real.json()["user"] == "\ufffd"


async def test_line_breaks_and_tabs_are_fine_in_a_body(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    user = _unique("gina")
    nid = await _publish(hub, publish_key, [user], body="line one\r\nline two\tand a tab")
    item = await hub.client.get(f"/v1/me/notifications/{nid}", headers=_auth(make_token(user)))
    assert item.json()["body"] == "line one\r\nline two\tand a tab"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"recipients": {"users": ["a\\udc00"]}, "title": "t"}',
        b'{"recipients": {"users": ["a"]}, "title": "t", "target": {"type": "\\ud800", "id": "1"}}',
        b'{"recipients": {"users": ["a"]}, "title": "t", "data": {"k": "\\udfff"}}',
        b'{"recipients": {"users": ["a"]}, "title": "t", "body": "\\ud83d"}',
    ],
)
async def test_lone_surrogates_are_422(hub: Any, publish_key: str, raw: bytes) -> None:
    headers = {**_auth(publish_key), "content-type": "application/json"}
    response = await hub.client.post("/v1/notifications", content=raw, headers=headers)
    _assert_problem(response, 422)


@pytest.mark.parametrize(
    "extra",
    [
        {"ttl": 2**70},
        {"ttl": 10**12},
        {"expires_at": 2**70},
        {"deliver_at": "9999-12-31T23:59:59Z"},
    ],
)
async def test_huge_times_are_422_not_500(
    hub: Any, publish_key: str, extra: dict[str, Any]
) -> None:
    body = {"recipients": {"users": ["a"]}, "title": "t", **extra}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    assert response.status_code in (202, 422), response.text


@pytest.mark.parametrize("since", ["\uff11\uff12", "1_000", "+5", " 12", "12 ", "nan", "1."])
async def test_epoch_ms_in_a_string_are_digits_or_a_json_number(
    hub: Any, make_token: Any, since: str
) -> None:
    """The schema's epoch milliseconds in a string: ASCII digits, or a number as JSON
    writes it (a query's `number`); what only float() would read as one (full-width
    digits, underscores, a plus sign, spaces, nan) is a 422, not a time near 1970."""
    me = {"Authorization": f"Bearer {make_token('epoch-reader')}"}
    response = await hub.client.get("/v1/me/notifications", params={"since": since}, headers=me)
    _assert_problem(response, 422)
    assert "ASCII digits or a JSON number" in response.text
    for fine in ("12", "0012", "1.1", "1e3", "-0.0"):
        answer = await hub.client.get("/v1/me/notifications", params={"since": fine}, headers=me)
        assert answer.status_code == 200, (fine, answer.text)


async def test_oversized_headers_and_ids_are_422(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    body = {"recipients": {"users": ["a"]}, "title": "t"}
    for key in ("k" * 201, ""):  # an empty key is no key shared by the tenant's requests
        headers = {**_auth(publish_key), "Idempotency-Key": key}
        refused = await hub.client.post("/v1/notifications", json=body, headers=headers)
        _assert_problem(refused, 422)
    user = _auth(make_token("hank"))
    _assert_problem(await hub.client.get("/v1/me/notifications/" + "A" * 5000, headers=user), 422)
    bulk = {"ids": ["0" * 26] * 101, "read": True}
    _assert_problem(
        await hub.client.post("/v1/me/notifications/bulk", json=bulk, headers=user), 422
    )


@pytest.mark.parametrize("tenant", ["a%00", "%C3%A9", "t" * 65])
async def test_a_recall_naming_a_malformed_tenant_is_422(
    hub: Any, publish_key: str, tenant: str
) -> None:
    """As every route that takes a tenant answers it, not a 403 or 404 naming it."""
    url = f"/v1/notifications/01JD3Q4M6T9W2Z8K5N7R1C0B3X?tenant={tenant}"
    response = await hub.client.delete(url, headers=_auth(publish_key))
    _assert_problem(response, 422)
    assert [error["field"] for error in response.json()["errors"]] == ["query.tenant"]
    scheduled = await hub.client.get(
        f"/v1/delayed/01JD3Q4M6T9W2Z8K5N7R1C0B3X?tenant={tenant}", headers=_auth(publish_key)
    )
    assert (scheduled.status_code, scheduled.json()["errors"]) == (422, response.json()["errors"])


# --- streams -----------------------------------------------------------------------


async def _stream_count(hub: Any, expected: int, timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while hub.app_state["hub"].stream_count != expected:
            await asyncio.sleep(0.05)


def _raw_stream(hub: Any, token: str, *, rcvbuf: int | None = None) -> socket.socket:
    """A stream request on a bare socket that we then never read from."""
    host, port = hub.base_url.removeprefix("http://").split(":")
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, int(port)))
    request = (
        f"GET /v1/me/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\n\r\n"
    )
    sock.sendall(request.encode())
    return sock


async def test_slow_reader_is_closed_by_the_send_timeout(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    user = _unique("slow")
    sock = _raw_stream(hub, make_token(user), rcvbuf=4096)
    try:
        await _stream_count(hub, 1, 10)
        big = {"body": "b" * 4000, "data": {"blob": "d" * 15_000}}
        # ~20 KB per event; enough to fill the socket buffers (4 MB at most here) and
        # the server's write buffer, so a send blocks past the timeout.
        sent = 0
        while hub.app_state["hub"].stream_count and sent < 600:
            await asyncio.gather(*(_publish(hub, publish_key, [user], **big) for _ in range(20)))
            sent += 20
        await _stream_count(hub, 0, 30)
    finally:
        sock.close()
    dropped = hub.app_state["metrics"].streams_dropped_total.labels(reason="send_timeout")
    assert dropped._value.get() >= 1


async def test_vanished_client_releases_its_stream(hub: Any, make_token: Any) -> None:
    sock = _raw_stream(hub, make_token(_unique("gone")))
    await _stream_count(hub, 1, 10)
    # Reset, not close: no FIN handshake, the peer just disappears.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    await _stream_count(hub, 0, 10)


# --- idempotency --------------------------------------------------------------------


async def test_concurrent_duplicates_send_once(hub: Any, publish_key: str, make_token: Any) -> None:
    user = _unique("ivan")
    headers = {**_auth(publish_key), "Idempotency-Key": _unique("order")}
    body = {"recipients": {"users": [user]}, "title": "exactly one"}
    responses = await asyncio.gather(
        *(hub.client.post("/v1/notifications", json=body, headers=headers) for _ in range(10))
    )
    statuses = {r.status_code for r in responses}
    assert statuses <= {202, 409}, [r.text for r in responses]
    accepted = [r.json() for r in responses if r.status_code == 202]
    assert accepted and all(a == accepted[0] for a in accepted)
    counts = await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(user)))
    assert counts.json()["total"] == 1


async def test_a_delayed_publish_repeated_with_its_key_answers_the_first_response(
    hub: Any, publish_key: str
) -> None:
    """The key's hash covers the `delay` sent, not the time made of it (later at each
    repeat): the same body answers the first response, another delay is another body."""
    headers = {**_auth(publish_key), "Idempotency-Key": _unique("later")}
    body = {"recipients": {"users": [_unique("lia")]}, "title": "later", "delay": 3600}
    first = await hub.client.post("/v1/notifications", json=body, headers=headers)
    again = await hub.client.post("/v1/notifications", json=body, headers=headers)
    assert first.status_code == again.status_code == 202, again.text
    assert again.json() == first.json()
    other = {**body, "delay": 3601}
    _assert_problem(await hub.client.post("/v1/notifications", json=other, headers=headers), 422)


@pytest.mark.parametrize(
    "refused",
    [
        {"recipients": {"groups": ["no-such-group"]}},
        {"expires_at": 1_000_000_000_000},  # 2001
        {"ttl": 40_000_000},
        {"ttl": 40_000_000, "delay": 3600},
        {"actions": [{"id": "ok", "label": "OK", "webhook": "no-such-definition"}]},
    ],
    ids=["unknown-group", "past-expiry", "long-ttl", "scheduled-long-ttl", "unknown-webhook"],
)
async def test_a_publish_refused_before_writing_leaves_its_key_free(
    hub: Any, publish_key: str, make_token: Any, refused: dict[str, Any]
) -> None:
    """A refused request wrote nothing, so it keeps no key: the corrected request with the
    same key is published once, and its repeat answers its response."""
    user = _unique("rita")
    headers = {**_auth(publish_key), "Idempotency-Key": _unique("fixed")}
    body = {"recipients": {"users": [user]}, "title": "corrected"}
    wrong = {**body, **refused}
    _assert_problem(await hub.client.post("/v1/notifications", json=wrong, headers=headers), 422)
    fixed = await hub.client.post("/v1/notifications", json=body, headers=headers)
    assert fixed.status_code == 202, fixed.text
    again = await hub.client.post("/v1/notifications", json=body, headers=headers)
    assert (again.status_code, again.json()) == (202, fixed.json())
    counts = await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(user)))
    assert counts.json()["total"] == 1


# --- the wording of refusals -------------------------------------------------------


async def test_a_long_title_is_counted_in_characters(hub: Any, publish_key: str) -> None:
    body = {"recipients": {"users": ["x"]}, "title": "x" * 5000}
    response = await hub.client.post("/v1/notifications", json=body, headers=_auth(publish_key))
    _assert_problem(response, 422)
    error = response.json()["errors"][0]
    assert error["field"] == "body.title" and error["type"] == "string_too_long"
    assert error["message"] == "String should have at most 200 characters, not 5000"
    assert "items" not in response.json()["detail"]


async def test_a_number_past_pythons_digit_limit_is_invalid_json_not_400(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """Python refuses to read an integer of more than 4300 digits (CVE-2020-10735); FastAPI
    answered that 400 "There was an error parsing the body", unlike any other body it
    cannot read."""
    digits = "1" * 5000
    for path, method, key, raw in (
        ("/v1/notifications", "POST", publish_key, '{"recipients": {"users": ["x"]}, "ttl": '),
        ("/v1/me/preferences", "PUT", make_token("digits"), '{"categories": '),
    ):
        headers = {**_auth(key), "content-type": "application/json"}
        content = f"{raw}{digits}}}".encode()
        response = await hub.client.request(method, path, content=content, headers=headers)
        _assert_problem(response, 422)
        detail = response.json()["detail"]
        assert detail.startswith("request body is not valid JSON: Exceeds the limit (4300 digits)")
        assert response.json()["errors"] == [
            {"field": "body", "message": detail.split(": ", 1)[1], "type": "json_invalid"}
        ]


async def test_malformed_json_names_its_place_not_a_field(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    raw = b'{"recipients": {"users": ["x"]},\n "title": "x",,}'
    for path, method, key in (
        ("/v1/notifications", "POST", publish_key),
        ("/v1/me/preferences", "PUT", make_token("json")),
    ):
        headers = {**_auth(key), "content-type": "application/json"}
        response = await hub.client.request(method, path, content=raw, headers=headers)
        _assert_problem(response, 422)
        where = "invalid JSON at line 2, column 15 (position 47)"
        assert response.json()["detail"].startswith(f"request body is not valid JSON: {where}")
        assert response.json()["errors"][0]["field"] == "body"


async def test_json_without_a_content_type_is_read_as_json(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    """No Content-Type: the body is read as JSON (as the publish fast path reads it); a
    body of another type is refused saying what the hub wants."""
    user = _auth(make_token("untyped"))
    body = orjson.dumps({"recipients": {"users": ["untyped"]}, "title": "plain"})
    published = await hub.client.post("/v1/notifications", content=body, headers=_auth(publish_key))
    assert published.status_code == 202, published.text
    put = await hub.client.put("/v1/me/preferences", content=b'{"locale": "pt"}', headers=user)
    assert put.status_code == 200 and put.json()["locale"] == "pt"
    typed = {**user, "content-type": "text/plain"}
    refused = await hub.client.put("/v1/me/preferences", content=b'{"locale": "pt"}', headers=typed)
    _assert_problem(refused, 422)
    wanted = "the body must be a JSON object (sent with Content-Type: application/json)"
    assert refused.json()["detail"] == f"body: {wanted}"


async def test_the_wrong_kind_of_credential_is_named(
    hub: Any, publish_key: str, make_token: Any
) -> None:
    body = {"recipients": {"users": ["x"]}, "title": "t"}
    token = make_token("kind")
    as_key = await hub.client.post("/v1/notifications", json=body, headers=_auth(token))
    _assert_problem(as_key, 401)
    assert as_key.json()["detail"] == (
        "this route takes an API key (nh_...); the credential sent is a user token"
    )
    for path in ("/v1/me/notifications", "/v1/me/stream"):
        as_token = await hub.client.get(path, headers=_auth(publish_key))
        _assert_problem(as_token, 401)
        assert as_token.json()["detail"] == (
            "this route takes a user token (a JWT); the credential sent is an API key"
        )
    stream = await hub.client.get(f"/v1/me/stream?access_token={publish_key}")
    assert "the credential sent is an API key" in stream.json()["detail"]
    garbage = await hub.client.post("/v1/notifications", json=body, headers=_auth("nh_x_y"))
    assert garbage.json()["detail"] == "invalid API key"


@pytest.mark.parametrize(
    "number",
    [
        "18446744073709551616",
        "-9223372036854775809",  # orjson: the float -2**63, a valid integer's value
        "9223372036854775808",
        "123456789012345678901234567890",
        "-1e30",
    ],
)
async def test_numbers_past_64_bits_are_422_never_changed(
    hub: Any, publish_key: str, number: str
) -> None:
    """JSON does not bound numbers, jsonb and orjson do: an integer past 64 bits (which
    orjson reads as a float, its last digits lost) is refused by name, whichever way the
    body was read, never stored changed."""
    body = f'{{"recipients": {{"users": ["a"]}}, "title": "n", "data": {{"n": {number}}}}}'
    headers = {**_auth(publish_key), "content-type": "application/json"}
    response = await hub.client.post("/v1/notifications", content=body, headers=headers)
    _assert_problem(response, 422)
    assert "body.data" in response.text and "64 bits" in response.text


@pytest.mark.parametrize("number", ["9223372036854775807", "-9223372036854775808", "-12345.678"])
async def test_numbers_within_64_bits_are_kept_exactly(
    hub: Any, publish_key: str, make_token: Any, number: str
) -> None:
    user = _unique("big-number")
    body = f'{{"recipients": {{"users": ["{user}"]}}, "title": "n", "data": {{"n": {number}}}}}'
    headers = {**_auth(publish_key), "content-type": "application/json"}
    response = await hub.client.post("/v1/notifications", content=body, headers=headers)
    assert response.status_code == 202, response.text
    listed = await hub.client.get("/v1/me/notifications", headers=_auth(make_token(user)))
    [item] = listed.json()["items"]
    assert item["data"]["n"] == orjson.loads(number)
    assert type(item["data"]["n"]) is type(orjson.loads(number))
