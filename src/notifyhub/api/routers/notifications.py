"""Service API: publish and recall notifications."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status

from notifyhub.api.deps import AppState, Publisher
from notifyhub.api.schemas import Accepted, NotificationId, PublishRequest
from notifyhub.domain.notification import Draft, Recipients

router = APIRouter(prefix="/v1/notifications", tags=["notifications"])
JSON = "application/json"


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
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Response:
    draft, recipients = _draft(body)
    accepted = await state["ingest"].publish(principal, draft, recipients, idempotency_key)
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
    tenant: Annotated[str, Query(max_length=64)] = "default",
) -> Response:
    await state["ingest"].recall(principal, tenant, notification_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
