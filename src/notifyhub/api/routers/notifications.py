"""Service API: publish and recall notifications."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from notifyhub.api.deps import AppState, Publisher, State, Unit
from notifyhub.api.schemas import Accepted, NotificationId, PublishRequest
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.auth import ServicePrincipal
from notifyhub.domain.notification import Draft, Recipients

PATH = "/v1/notifications"
MAX_IDEMPOTENCY_KEY = 200
JSON = "application/json"

router = APIRouter(prefix=PATH, tags=["notifications"])


def _draft(body: PublishRequest) -> tuple[Draft, Recipients]:
    fields = body.model_dump(exclude={"recipients", "ttl", "delay", "deliver_at"})
    deliver_at = body.deliver_at
    if body.delay is not None:
        deliver_at = datetime.now(UTC) + timedelta(seconds=body.delay)
    draft = Draft(ttl_s=body.ttl, deliver_at=deliver_at, **fields)
    to = body.recipients
    recipients = Recipients(users=tuple(to.users), groups=tuple(to.groups), topics=tuple(to.topics))
    return draft, recipients


@router.post("", status_code=status.HTTP_202_ACCEPTED, response_model=Accepted)
async def publish(
    body: PublishRequest,
    state: AppState,
    principal: Publisher,
    idempotency_key: Annotated[str | None, Header(max_length=MAX_IDEMPOTENCY_KEY)] = None,
) -> Response:
    """Also served by `api/fastpath.py` (`PublishFastPath`) when the request is valid."""
    return await accept(state, principal, body, idempotency_key)


async def accept(
    state: State, principal: ServicePrincipal, body: PublishRequest, idempotency_key: str | None
) -> Response:
    """Publish a validated request; 202 with its `Accepted` JSON, once committed (the
    unit's session opens only when groups or topics are named, or it is scheduled)."""
    draft, recipients = _draft(body)
    async with UnitOfWork(state["sessionmaker"]) as unit:
        accepted = await state["ingest"].publish(
            unit, principal, draft, recipients, idempotency_key
        )
    answer = Accepted(
        id=accepted.id, recipients=accepted.recipients, scheduled_for=accepted.scheduled_for
    )
    # Already a valid `Accepted`: answer its JSON directly (FastAPI would validate it again).
    return Response(answer.model_dump_json(), status.HTTP_202_ACCEPTED, media_type=JSON)


@router.delete("/{notification_id}", status_code=status.HTTP_204_NO_CONTENT)
async def recall(
    notification_id: NotificationId,
    state: AppState,
    principal: Publisher,
    unit: Unit,
    tenant: Annotated[str, Query(max_length=64)] = "default",
) -> Response:
    await state["ingest"].recall(unit, principal, tenant, notification_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
