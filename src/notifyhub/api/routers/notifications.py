"""Service API: publish and recall notifications.

`POST /v1/notifications` has one definition, below: its parameters (`PublishRequest`,
the `Idempotency-Key` header, the `publish` scope) and the answer of `publish`. `serve`
binds that same definition to a bare request without FastAPI's dependency solving:
`api/fastpath.py` calls it for every publish (the hub's busiest request), and hands what
it does not take to the route. tests/integration/test_route_parity.py proves they agree.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Header, Query, Response, status
from pydantic import StringConstraints, TypeAdapter, ValidationError
from starlette.requests import Request

from notifyhub.api.deps import AppState, Publisher, Unit, authenticate_service, require
from notifyhub.api.openapi import NOT_FOUND, SERVICE
from notifyhub.api.params import NotificationIdPath
from notifyhub.api.schemas.common import Tenant
from notifyhub.api.schemas.escalation import steps_of
from notifyhub.api.schemas.notifications import PublishAccepted, PublishRequest
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.domain.digest import thread_key as digest_thread_key
from notifyhub.domain.notification import Draft, Recipients, extra_channels
from notifyhub.domain.trusted import trusted
from notifyhub.services.ingest import Published

PATH = "/v1/notifications"
SCOPE = Scope.PUBLISH
MAX_IDEMPOTENCY_KEY = 200
JSON = "application/json"

IdempotencyKey = Annotated[str, StringConstraints(min_length=1, max_length=MAX_IDEMPOTENCY_KEY)]
_idempotency_key: TypeAdapter[IdempotencyKey | None] = TypeAdapter(IdempotencyKey | None)

router = APIRouter(prefix=PATH, tags=["notifications"], responses=SERVICE)


_SHARED = tuple(
    name
    for name in Draft.model_fields
    if name in PublishRequest.model_fields
    and name not in ("deliver_at", "channels", "digest", "escalate")
)
"""The fields a request hands on to its draft as they are (`ttl`, `delay`, `deliver_at`,
`channels`, `digest`: converted)."""


_new_draft = trusted(Draft)


def _draft(body: PublishRequest) -> tuple[Draft, Recipients]:
    """The request as the domain takes it. Built without validating again: every field
    was validated by `PublishRequest`, as strictly as `Draft` would, or more, and
    validating twice costs a publish (docs/scaling.md, "Design notes")."""
    deliver_at = body.deliver_at
    if body.delay is not None:
        deliver_at = datetime.now(UTC) + timedelta(seconds=body.delay)
    fields = {name: getattr(body, name) for name in _SHARED}
    fields["tags"], fields["actions"] = tuple(body.tags), tuple(body.actions)
    fields["channels"] = extra_channels(body.channels)
    if body.digest is not None:
        fields["digest"] = body.digest.domain()
        if body.thread_key is None and body.collapse_key is None:
            fields["thread_key"] = digest_thread_key(body.digest.key)
    fields["escalate"] = steps_of(body.escalate)
    draft = _new_draft(ttl_s=body.ttl, deliver_at=deliver_at, **fields)
    to = body.recipients
    recipients = Recipients(users=tuple(to.users), groups=tuple(to.groups), topics=tuple(to.topics))
    return draft, recipients


# Also served by `api/fastpath.py` (through `serve` below) when the request is valid (a
# comment, not the docstring: the docstring is the operation's public description).
@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=PublishAccepted)
async def publish(
    body: PublishRequest,
    state: AppState,
    principal: Annotated[ServicePrincipal, Depends(require(SCOPE))],
    idempotency_key: Annotated[
        IdempotencyKey | None,
        Header(
            description="A repeat with the same key and body answers the first response and "
            "sends nothing; the same key with another body is a 422.",
            examples=["order-1042-shipped"],
        ),
    ] = None,
) -> Response:
    """Publish a notification to users, groups and topics: 202 with its id, how many
    recipients it reached, and when it is scheduled for (if delayed). A repeated
    `Idempotency-Key` answers the first request's result."""
    # Committed before the 202: the unit's session opens only when groups or topics are
    # named, or the notification is scheduled.
    draft, recipients = _draft(body)
    async with UnitOfWork(state["sessionmaker"]) as unit:
        accepted = await state["ingest"].publish(
            unit, principal, draft, recipients, idempotency_key, delay_s=body.delay
        )
    return Response(_accepted_json(accepted), status.HTTP_202_ACCEPTED, media_type=JSON)


def _accepted_json(accepted: Published) -> bytes:
    """`PublishAccepted`'s JSON, answered directly (FastAPI would validate it again); one
    published now (not scheduled) is written by orjson, exactly as pydantic writes it (no time to
    format), and without building the model."""
    if accepted.scheduled_for is None:
        answer = {"id": accepted.id, "recipients": accepted.recipients, "scheduled_for": None}
        return orjson.dumps(answer)
    model = PublishAccepted(
        id=accepted.id, recipients=accepted.recipients, scheduled_for=accepted.scheduled_for
    )
    return model.model_dump_json().encode()


async def serve(request: Request) -> Response | None:
    """The route above for a bare request, or None for FastAPI to answer (its body read).

    Authenticates first (a bad key is refused before the body is read; the principal is
    kept in the scope for the route, so a request handed on is charged once), then takes
    only what it parses unambiguously (`_parse`)."""
    principal = await authenticate_service(request, SCOPE)
    parsed = _parse(request, await request.body())
    if parsed is None:
        return None
    body, idempotency_key = parsed
    return await publish(body, request.scope["state"], principal, idempotency_key)


def _parse(request: Request, body: bytes) -> tuple[PublishRequest, str | None] | None:
    """The route's parameters, or None when FastAPI should answer instead.

    Only the unambiguous case is taken: an `application/json` body (or no content type,
    which FastAPI parses as JSON too) that orjson parses and the route's model validates,
    as FastAPI validates it (`from_attributes`), and headers of the route's types. orjson
    refuses what the standard `json` module would accept beyond RFC 8259 (NaN): that goes
    to FastAPI too. An integer past 64 bits orjson reads as a float, its last digits
    lost: the body's checks refuse it either way (schemas/common.py `ensure_storable`)."""
    content_type = request.headers.get("content-type")
    if content_type is not None and content_type.partition(";")[0].strip().lower() != JSON:
        return None
    try:
        key = _idempotency_key.validate_python(request.headers.get("idempotency-key"))
        parsed = PublishRequest.model_validate(orjson.loads(body), from_attributes=True)
    except (orjson.JSONDecodeError, ValidationError):
        return None
    return parsed, key


@router.delete("/{notification_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NOT_FOUND)
async def recall(
    notification_id: NotificationIdPath,
    state: AppState,
    principal: Publisher,
    unit: Unit,
    tenant: Annotated[
        Tenant, Query(description="The notification's tenant.", examples=["default"])
    ] = "default",
) -> Response:
    """Recall: cancel the notification if still scheduled, else remove it from every
    recipient's inbox (live `delete` events)."""
    await state["ingest"].recall(unit, principal, tenant, notification_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
