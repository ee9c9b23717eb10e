"""Actions: a user completes one of their copy's buttons, once, and a service hears of it.

A copy's actions are one choice (approve or reject): the first completion closes them all,
and asking again is a 409 carrying the first outcome. The completion is kept in Redis
(lua/act.lua: once, in the same script as the copy's read state, counts and `update`
event), logged in durable inbox mode, and then, when the action names a `webhook` (a
delivery definition), added to the outbox, which signs, sends and retries it.

The outbox row's id is derived from the tenant, user, notification and completion time,
and added only when absent. So when PostgreSQL fails after Redis kept the completion (the
answer is a 503), the client's retry finds the completion, adds the same delivery (once:
the same id) and answers the 409 with the outcome: the service hears of every click once
as long as someone retries the 503 (notifyhub.js does). A click whose retry never comes
is kept in the inbox but not sent: a known gap, logged.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from ulid import ULID

from notifyhub.db.unit import Units
from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.notification import Action, InboxItem, from_ms, to_rfc3339
from notifyhub.errors import AlreadyDone, Conflict, InvalidInput, NotFound
from notifyhub.services.deliveries import Kicker, enqueue_once
from notifyhub.services.durable import DurableInbox
from notifyhub.store.inbox import InboxStore
from notifyhub.store.operations import ActOp

log = logging.getLogger(__name__)

EVENT_TYPE = "action.completed"
"""The `type` of the payload an action's webhook receives."""


def delivery_id(tenant: str, user: str, notification_id: str, at_ms: int) -> str:
    """The outbox id of one completion's webhook: a ULID of the completion's time whose
    random part is a hash of whose copy it is, the same on every retry."""
    copy = "\x00".join((tenant, user, notification_id)).encode()
    return str(ULID.from_bytes(at_ms.to_bytes(6, "big") + hashlib.sha256(copy).digest()[:10]))


def webhook_payload(item: InboxItem, user: str, action: Action, at_ms: int) -> dict[str, Any]:
    """What the action's delivery definition receives (signed by the outbox)."""
    return {
        "type": EVENT_TYPE,
        "tenant": item.tenant,
        "user": user,
        "notification_id": item.id,
        "action": action.id,
        "completed_at": to_rfc3339(from_ms(at_ms)),
        "notification": {
            "title": item.title,
            "category": item.category,
            "data": item.data,
            "target": None if item.target is None else item.target.model_dump(),
        },
    }


class ActionService:
    """Completes actions (in Redis). An action's webhook enters the outbox in a unit of
    its own, committed before the answer, a 409 (`AlreadyDone`) answer included."""

    def __init__(
        self,
        store: InboxStore,
        units: Units,
        sender: Kicker | None = None,
        durable: DurableInbox | None = None,
    ) -> None:
        self._store = store
        self._units = units
        self._sender = sender
        """Sends a webhook at once after its commit (None: the dispatcher's next pass)."""
        self._durable = durable

    async def complete(self, me: UserPrincipal, notification_id: str, action_id: str) -> InboxItem:
        """Complete `action_id` on the user's copy: the copy as it now is. 404 for a copy
        or action the user does not have; 409 (`AlreadyDone`) once one was completed."""
        item = await self._store.get(me.tenant, me.user, notification_id)
        if item is None:
            raise NotFound(f"no notification {notification_id}")
        ids = [action.id for action in item.actions]
        if action_id not in ids:
            known = ", ".join(ids) or "none"
            raise NotFound(f"notification {notification_id} has no action {action_id!r} ({known})")
        index = ids.index(action_id) + 1
        shown = item.thread.latest_id if item.thread is not None else ""
        acted = await self._store.act(
            me.tenant, me.user, notification_id, index, action_id, activity=shown
        )
        if acted.code == 3:  # a new activity joined the thread between the two reads
            raise Conflict(
                f"notification {notification_id} shows a newer activity now: load it again"
            )
        if acted.done is None:  # deleted between the two reads
            raise NotFound(f"no notification {notification_id}")
        done_index, at_ms = acted.done
        done = item.actions[done_index - 1]
        if acted.code == 2 and self._durable is not None:
            op = ActOp(
                id=notification_id, index=index, action=action_id, at_ms=at_ms, activity=shown
            )
            self._durable.changed(me.tenant, me.user, op)
        await self._tell(item, me.user, done, at_ms)
        if acted.code != 2:
            raise AlreadyDone(
                f"notification {notification_id}: action {done.id!r} was completed already",
                completed={
                    "action": done.id,
                    "completed_at": to_rfc3339(from_ms(at_ms)),
                    "completed_by": me.user,
                },
            )
        found = await self._store.get(me.tenant, me.user, notification_id)
        if found is None:
            raise NotFound(f"no notification {notification_id}")
        return found

    async def _tell(self, item: InboxItem, user: str, action: Action, at_ms: int) -> None:
        """The completion's webhook, added to the outbox once (see the module's note)."""
        if action.webhook is None:
            return
        try:
            async with self._units() as unit:
                await enqueue_once(
                    unit,
                    delivery_id(item.tenant, user, item.id, at_ms),
                    action.webhook,
                    webhook_payload(item, user, action, at_ms),
                    f"{user} completed {action.id!r} on {item.id}",
                    tenant=item.tenant,
                    sender=self._sender,
                )
        except (InvalidInput, Conflict) as exc:
            # Checked at publish; deleted or disabled since. Not the user's doing: their
            # completion stands, the operator hears of it.
            log.error(
                "action %r on %s (tenant %s): webhook not sent: %s",
                action.id,
                item.id,
                item.tenant,
                exc.detail,
            )
