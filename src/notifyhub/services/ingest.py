"""Accepting notifications: resolve recipients, write every copy, ring the doorbells."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import orjson
from pydantic import BaseModel, JsonValue
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub import deadline as request_deadline
from notifyhub.db.repositories import channel_sends
from notifyhub.db.repositories import deliveries as deliveries_repo
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.auth import ServicePrincipal
from notifyhub.domain.escalation import Step
from notifyhub.domain.notification import Draft, Notification, Recipients, from_ms
from notifyhub.domain.trusted import trusted
from notifyhub.errors import InvalidInput, NotFound, PermissionDenied
from notifyhub.metrics import Metrics
from notifyhub.services import groups as group_service
from notifyhub.services.delayed import DelayedService, NewMessage, Reserved
from notifyhub.services.durable import DurableInbox
from notifyhub.services.escalation import Escalations
from notifyhub.services.fanouts import Fanouts
from notifyhub.services.snooze import forget_in
from notifyhub.services.topics import TopicService
from notifyhub.services.views import Views
from notifyhub.settings import Settings
from notifyhub.store.codecs import PushedOut
from notifyhub.store.idempotency import IdempotencyRecord, IdempotencyStore
from notifyhub.store.inbox import InboxStore, Placement, TenantUsers, arrival_ms, arriving_now
from notifyhub.store.operations import RecallOp
from notifyhub.store.traces import Route, RoutingTraces, Sources
from notifyhub.tracing import Attributes, Tracing
from notifyhub.turns import sliced

MEMBER_PAGE = 20_000
SCHEDULED_QUEUE = "notifyhub.scheduled"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Published:
    """What a publish did: the id, how many users got a copy, when a scheduled one is due."""

    id: str
    recipients: int
    scheduled_for: datetime | None = None


class _Scheduled(BaseModel):
    """A scheduled notification's delayed-queue body: what `publish` was asked."""

    draft: Draft
    recipients: Recipients


_notification = trusted(Notification)
_CONTENT = tuple(
    name
    for name in Draft.model_fields
    if name in Notification.model_fields and name != "expires_at"
)
"""What a notification takes from its draft as it is (its id and times are made)."""


def body_sha(draft: Draft, recipients: Recipients, delay_s: int | None = None) -> str:
    """A stable hash of what was asked, to tell an honest retry from a key reused. A
    request that gave a `delay` is hashed with the delay, not with the `deliver_at` made
    of it (now plus the delay: another instant at each retry)."""
    # Without tags or actions when it has none: the hash a retry made before they existed
    # still matches.
    exclude = {
        field for field in ("tags", "actions", "channels", "escalate") if not getattr(draft, field)
    }
    if draft.body_format == "text":
        exclude.add("body_format")
    exclude |= {f for f in ("thread_key", "thread_window_s", "digest") if getattr(draft, f) is None}
    if delay_s is not None:
        exclude.add("deliver_at")
    asked = draft.model_dump(mode="json", exclude=exclude)
    if asked["actor"] is not None:  # an actor's name and avatar, likewise
        asked["actor"] = {k: v for k, v in asked["actor"].items() if v is not None}
    canonical: dict[str, object] = {"draft": asked, "to": recipients.model_dump(mode="json")}
    if delay_s is not None:
        canonical["delay"] = delay_s
    return hashlib.sha256(orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)).hexdigest()


async def _check_webhooks(session: AsyncSession, draft: Draft) -> None:
    """Each action's `webhook` names a delivery definition of the tenant (a disabled one
    too: it may be enabled again before the click)."""
    named = {(draft.tenant, a.webhook) for a in draft.actions if a.webhook is not None}
    found = await deliveries_repo.definitions(session, named)
    for i, action in enumerate(draft.actions):
        if action.webhook is not None and (draft.tenant, action.webhook) not in found:
            raise InvalidInput(
                f"actions.{i}.webhook: tenant {draft.tenant!r} has no delivery definition "
                f"{action.webhook!r} (PUT /v1/admin/delivery-definitions/{action.webhook})"
            )


class IngestService:
    """`publish` and `recall` for services holding a publish key."""

    def __init__(
        self,
        store: InboxStore,
        idempotency: IdempotencyStore,
        topics: TopicService,
        delayed: DelayedService,
        settings: Settings,
        metrics: Metrics,
        durable: DurableInbox | None = None,
        tracing: Tracing | None = None,
        views: Views | None = None,
        routing: RoutingTraces | None = None,
        fanouts: Fanouts | None = None,
    ) -> None:
        self._store = store
        self._on_channel_send: Callable[[], None] | None = None
        self._escalations: Escalations | None = None
        """Schedules escalation steps (services/escalation.py), if set."""
        """Told of every channel send written (the channel worker's nudge), if set."""
        self._views = views
        """The tenants' views, as a hint for fan-outs (`Views.known`)."""
        self._routing = routing
        """Where each publish's routing is recorded (None: nowhere)."""
        self._tracing = tracing or Tracing()
        self._topics = topics
        self._delayed = delayed
        self._idempotency = idempotency
        self._settings = settings
        self._metrics = metrics
        self.durable = durable
        """Durable inbox mode's log, else None."""
        self.fanouts = fanouts
        """Places deferred fan-outs after their 202; None: none are deferred."""

    def escalate_with(self, escalations: Escalations) -> None:
        """Schedule publishes' escalation steps (their own, or the tenant's defaults)."""
        self._escalations = escalations

    def _steps(self, draft: Draft) -> tuple[Step, ...]:
        """The draft's escalation steps (its own, else the tenant's default for its
        category; none without an escalation service)."""
        if self._escalations is None:
            return ()
        return self._escalations.steps_of(draft)

    def on_channel_send(self, nudge: Callable[[], None]) -> None:
        """Call `nudge` after each channel send is written (the worker runs sooner)."""
        self._on_channel_send = nudge

    async def publish(
        self,
        unit: UnitOfWork,
        principal: ServicePrincipal,
        draft: Draft,
        recipients: Recipients,
        idempotency_key: str | None = None,
        *,
        delay_s: int | None = None,
    ) -> Published:
        """Accept a notification from a service, in the caller's unit of work (which must
        commit before the 202: a scheduled notification is written there). PostgreSQL is
        used only when groups or topics are named, the notification is scheduled or has
        channels beyond the inbox (the unit's session opens on first use); users alone,
        inbox only, need Redis only. The idempotency
        answer is recorded after the unit commits; a request refused by the checks that
        come before anything is written frees its key again. `delay_s` is the request's
        `delay`, if it gave one (the draft's `deliver_at` was made of it): the
        idempotency hash covers it."""
        _check_tenant(principal, draft.tenant)
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        record = IdempotencyRecord("", str(ULID.from_timestamp(now_ms / 1000)), now_ms)
        claimed = False  # whether this request claimed the key (not a retry of a claim)
        if idempotency_key is not None:
            fresh = replace(record, body_sha=body_sha(draft, recipients, delay_s))
            record = await self._idempotency.begin(draft.tenant, idempotency_key, fresh)
            if record.response is not None:
                return Published(**record.response)
            claimed = record == fresh
        try:
            users, sources, notification = await self._checked(unit, draft, recipients, record)
        except Exception:  # not a cancellation: past the deadline, Redis may not answer
            if claimed and idempotency_key is not None:
                await self._release(draft.tenant, idempotency_key, record)
            raise
        if notification is None:
            accepted = await self._schedule(unit, draft, recipients, record, len(users))
        else:
            route = Route.of(recipients, sources)
            if draft.channels or self._steps(draft):  # first: a failed placement rolls back
                await self._beyond_inbox(unit.session, notification, draft, users)
            if draft.channels:
                self._nudge_after(unit)
            accepted = await self._send(notification, users, pull=False, route=route)
        if idempotency_key is not None:
            self._remember_after(unit, draft.tenant, idempotency_key, record, accepted)
        return accepted

    async def _checked(
        self, unit: UnitOfWork, draft: Draft, recipients: Recipients, record: IdempotencyRecord
    ) -> tuple[TenantUsers, Sources, Notification | None]:
        """What `publish` checks and resolves before it writes anything: the users and
        where each was reached, and the notification to send now (None: it is
        scheduled)."""
        if any(action.webhook for action in draft.actions):
            await _check_webhooks(unit.session, draft)
        users, sources = await self._resolve_in(unit, draft.tenant, recipients)
        if draft.deliver_at is not None and draft.deliver_at > datetime.now(UTC):
            # Its expiry counts from its delivery, as `publish_scheduled` builds it:
            # checked now, so one past the maximum is refused, not dropped when due.
            self._lifetime(draft, draft.deliver_at, scheduled=True)
            return users, sources, None
        return users, sources, self._build(draft, record)

    async def _release(self, tenant: str, key: str, claim: IdempotencyRecord) -> None:
        """Free the key a refused publish claimed (it wrote nothing): the corrected request
        may use it. If Redis fails here the key stays claimed, logged; the refusal is
        answered all the same."""
        try:
            await self._idempotency.release(tenant, key, claim)
        except RedisError as exc:
            log.warning(
                "idempotency key of refused publish %s kept: %s", claim.notification_id, exc
            )

    def _nudge_after(self, unit: UnitOfWork) -> None:
        """Wake the channel worker once the channel send is committed."""
        nudge = self._on_channel_send
        if nudge is None:
            return

        async def wake() -> None:
            nudge()

        unit.after_commit(wake)

    def _remember_after(
        self,
        unit: UnitOfWork,
        tenant: str,
        key: str,
        record: IdempotencyRecord,
        accepted: Published,
    ) -> None:
        """A retry gets this answer only once what it answers for is committed."""
        response = {
            "id": accepted.id,
            "recipients": accepted.recipients,
            "scheduled_for": accepted.scheduled_for,
        }

        async def remember() -> None:
            await self._idempotency.finish(tenant, key, replace(record, response=response))

        unit.after_commit(remember)

    async def _schedule(
        self,
        unit: UnitOfWork,
        draft: Draft,
        recipients: Recipients,
        record: IdempotencyRecord,
        count: int,
    ) -> Published:
        """Durable in PostgreSQL before the 202; the delayed queue makes it ready on time."""
        assert draft.deliver_at is not None
        body: JsonValue = _Scheduled(draft=draft, recipients=recipients).model_dump(mode="json")
        due_ms = int(draft.deliver_at.timestamp() * 1000)
        new = NewMessage(draft.tenant, SCHEDULED_QUEUE, body, due_ms, id=record.notification_id)
        _id, due_at = await self._delayed.push(unit, new)
        return Published(id=record.notification_id, recipients=count, scheduled_for=due_at)

    async def publish_scheduled(self, session: AsyncSession, message: Reserved) -> Published:
        """Publish a scheduled notification now; its id is the queue message's id, so a
        second offer of the same message writes no second copy (nor moves the first).

        Its id was made at its acceptance (the 202 returned it), but it is created now:
        `created_at` is its delivery, when it arrives in the inboxes, and its copies sort
        by that ms (`arrival_ms`), as a copy back from a snooze sorts by its return. So a
        `since` poller that polled between the acceptance and now, and moved its `since`
        past the id's time, still gets it, once, where it arrived (oldest first, after
        what came before it); lists, cursors and `created_after`/`created_before` agree,
        and the item's `created_at` is the time a poller's next `since` takes."""
        scheduled = _Scheduled.model_validate(message.message.body)
        draft = scheduled.draft.model_copy(update={"deliver_at": None})
        users, sources = await self._resolve(session, draft.tenant, scheduled.recipients)
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        record = IdempotencyRecord("", message.message.id, now_ms)
        route = Route.of(scheduled.recipients, sources)
        notification = self._build(draft, record)
        await self._beyond_inbox(session, notification, draft, users)
        arrived = arrival_ms(notification)
        return await self._send(notification, users, pull=False, route=route, arrived_ms=arrived)

    async def publish_internal(
        self,
        session: AsyncSession,
        draft: Draft,
        recipients: Recipients,
        *,
        origin: str = "producer",
    ) -> Published:
        """Publish on the hub's own behalf (periodic producers): no key, no idempotency.
        `origin` is every recipient's source in the routing trace (`producer:<name>`)."""
        users, _sources = await self._resolve(session, draft.tenant, recipients)
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        record = IdempotencyRecord("", str(ULID.from_timestamp(now_ms / 1000)), now_ms)
        route = replace(Route.of(recipients), origin=origin)
        notification = self._build(draft, record)
        await self._beyond_inbox(session, notification, draft, users)
        return await self._send(notification, users, pull=False, route=route)

    async def resolve_internal(
        self, session: AsyncSession, tenant: str, recipients: Recipients
    ) -> list[str]:
        """The users `recipients` name now, on the hub's own behalf (producers)."""
        users, _sources = await self._resolve(session, tenant, recipients)
        return users.ids

    async def send(
        self,
        draft: Draft,
        users: Sequence[str],
        *,
        pull: bool = False,
        origin: str = "rule",
        session: AsyncSession | None = None,
    ) -> Published:
        """Publish a draft to known users (rules and producers resolve their own);
        `origin` is every recipient's source in the routing trace (`rule:<name>`,
        `producer:<name>`). A draft with channels beyond the inbox needs the caller's
        `session`, which its channel send is written in."""
        if draft.channels and session is None:
            raise ValueError("a draft with channels beyond the inbox is sent in a session")
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        record = IdempotencyRecord("", str(ULID.from_timestamp(now_ms / 1000)), now_ms)
        targets = TenantUsers(draft.tenant, list(dict.fromkeys(users)))
        route = Route(origin=origin)
        notification = self._build(draft, record)
        if session is not None:
            await self._beyond_inbox(session, notification, draft, targets)
        return await self._send(notification, targets, pull=pull, route=route)

    async def _beyond_inbox(
        self,
        session: AsyncSession,
        notification: Notification,
        draft: Draft,
        users: TenantUsers,
    ) -> None:
        """The notification's channel send (e-mail, Web Push), in the caller's
        transaction before its copies are placed, so it commits with the publish or not
        at all (a placement that fails rolls it back); nothing without channels beyond
        the inbox (no PostgreSQL: a publish to users stays Redis only). Its escalation
        steps likewise (services/escalation.py)."""
        named = draft.ttl_s is not None or draft.expires_at is not None
        recipients = users.ids
        steps = self._steps(draft)
        if steps and self._escalations is not None:
            await self._escalations.schedule(
                session, notification, steps, recipients, named_expiry=named
            )
        if not draft.channels:
            return
        await channel_sends.add(
            session,
            notification,
            draft.channels,
            recipients,
            named_expiry=named,
            digest=draft.digest.model_dump() if draft.digest else None,
        )

    async def recall(
        self, unit: UnitOfWork, principal: ServicePrincipal, tenant: str, notification_id: str
    ) -> int:
        """Remove a notification from every inbox holding it (a thread's activity leaves
        its thread, which shows the one before: InboxStore.recall); returns how many. A
        notification not published yet is cancelled in the delayed queue, in `unit`."""
        _check_tenant(principal, tenant)
        holders = [u for u in await self._store.recipients(notification_id) if u[0] == tenant]
        if holders and self.fanouts is not None:  # no more of its batches written
            await self.fanouts.cancel(notification_id)
        if not holders:
            await self._cancel_scheduled(unit, tenant, notification_id)
            return 0
        removed = await self._store.recall_many(
            tenant, [user for _, user in holders], notification_id
        )
        await self._store.forget(notification_id)
        await forget_in(unit.session, self._delayed, tenant, [notification_id])  # snoozes
        if self.durable is not None:
            self.durable.changed(tenant, "", RecallOp(id=notification_id))
        if self._routing is not None:
            await self._routing.recalled(notification_id, int(datetime.now(UTC).timestamp() * 1000))
        return removed

    async def _cancel_scheduled(self, unit: UnitOfWork, tenant: str, notification_id: str) -> None:
        """Only `tenant`'s own scheduled notification: the delayed queue looks the id up
        in that tenant alone."""
        try:
            found = await self._delayed.get(unit.session, tenant, notification_id)
        except NotFound:
            found = None
        if found is None or found.message.queue != SCHEDULED_QUEUE:
            raise NotFound(f"no notification {notification_id} in tenant {tenant}")
        await self._delayed.cancel(unit, tenant, notification_id)

    async def resolve(
        self, unit: UnitOfWork, principal: ServicePrincipal, tenant: str, recipients: Recipients
    ) -> list[str]:
        """The users a publish to `recipients` would reach now, sending nothing (the same
        resolution and checks as `publish`: unknown groups or topics, the recipient cap)."""
        _check_tenant(principal, tenant)
        users, _sources = await self._resolve_in(unit, tenant, recipients)
        return users.ids

    async def _resolve_in(
        self, unit: UnitOfWork, tenant: str, recipients: Recipients
    ) -> tuple[TenantUsers, Sources]:
        """`_resolve` in the unit of work, whose session opens only when groups or topics
        are named (users alone need no PostgreSQL)."""
        session = unit.session if recipients.groups or recipients.topics else None
        return await self._resolve(session, tenant, recipients)

    async def _resolve(
        self, session: AsyncSession | None, tenant: str, recipients: Recipients
    ) -> tuple[TenantUsers, Sources]:
        """Each user once, in the order first reached: users named directly, then the
        groups', then the topics'; and where each was first reached (`Sources`: one entry
        per run of users from one source, so it costs nothing per user)."""
        if not (recipients.users or recipients.groups or recipients.topics):
            raise InvalidInput("recipients: name at least one user, group or topic")
        cap = self._settings.limits.max_recipients
        if session is not None and _one_group(recipients):
            return await self._group_members(session, tenant, recipients.groups[0], cap)
        users: dict[str, None] = dict.fromkeys(recipients.users)
        sources: list[tuple[int, str]] = [(len(users), "user")] if users else []
        # Without a session only users are named (publish opens one for groups/topics).
        streams = [] if session is None else self._sources(session, tenant, recipients)
        for kind, stream in streams:
            async for name, ids in stream:
                async for part in sliced(ids):  # a page of MEMBER_PAGE ids: turns between slices
                    users.update(dict.fromkeys(part))
                if len(users) > cap:
                    raise InvalidInput(f"recipients: more than {cap} users (the configured cap)")
                source = f"{kind}:{name}"
                if sources and sources[-1][1] == source:
                    sources[-1] = (len(users), source)
                elif not sources or len(users) > sources[-1][0]:
                    sources.append((len(users), source))
        return TenantUsers(tenant, list(users)), tuple(sources)

    async def _group_members(
        self, session: AsyncSession, tenant: str, group: str, cap: int
    ) -> tuple[TenantUsers, Sources]:
        """`_resolve` of one group alone, the everyday broadcast: its members are unique
        (the table's key), so its pages are joined as they come, not deduped
        (docs/scaling.md, "The POST rests too")."""
        ids: list[str] = []
        async for _name, page in group_service.iter_members(session, tenant, [group], MEMBER_PAGE):
            ids += page
            if len(ids) > cap:
                raise InvalidInput(f"recipients: more than {cap} users (the configured cap)")
        return TenantUsers(tenant, ids), ((len(ids), f"group:{group}"),) if ids else ()

    def _sources(
        self, session: AsyncSession, tenant: str, recipients: Recipients
    ) -> list[tuple[str, AsyncIterator[tuple[str, list[str]]]]]:
        """Member streams of the named groups and topics (PostgreSQL only when named), as
        (`group` or `topic`, pages of (its name, users))."""
        sources = []
        if recipients.groups:
            groups = list(recipients.groups)
            members = group_service.iter_members(session, tenant, groups, MEMBER_PAGE)
            sources.append(("group", members))
        if recipients.topics:
            topics = list(recipients.topics)
            sources.append(("topic", self._topics.iter_users(session, tenant, topics, MEMBER_PAGE)))
        return sources

    def _build(self, draft: Draft, record: IdempotencyRecord) -> Notification:
        """The notification of a draft. Not validated again: a draft's fields are valid
        notification fields, and validating twice costs a publish (docs/scaling.md)."""
        created = from_ms(record.created_ms)
        expires = self._expiry(draft, created)
        fields = {name: getattr(draft, name) for name in _CONTENT}
        return _notification(
            id=record.notification_id, created_at=created, expires_at=expires, **fields
        )

    def _expiry(self, draft: Draft, created: datetime) -> datetime:
        """When the draft's notification, created at `created`, expires (`_lifetime`)."""
        lives = self._lifetime(draft, created)
        return draft.expires_at if draft.expires_at is not None else created + lives

    def _lifetime(self, draft: Draft, created: datetime, *, scheduled: bool = False) -> timedelta:
        """How long the draft's notification, created at `created`, lives: until its
        `expires_at`, else its `ttl` (or the default), at most `max_ttl_s`. A refusal
        names the field the request sent; a scheduled one's lifetime counts from its
        delivery. (A span, not a time: a delivery at the end of the calendar plus a TTL
        would overflow.)"""
        most = timedelta(seconds=self._settings.max_ttl_s)
        if draft.expires_at is None:
            lives = timedelta(seconds=draft.ttl_s or self._settings.default_ttl_s)
            if lives > most:
                raise InvalidInput(f"ttl: at most {self._settings.max_ttl_s} seconds")
            return lives
        lives = draft.expires_at - created
        if lives <= timedelta(0):
            raise InvalidInput("expires_at: must be in the future")
        if lives > most:
            since = "the delivery time" if scheduled else "now"
            raise InvalidInput(
                f"expires_at: at most {self._settings.max_ttl_s} seconds after {since}"
            )
        return lives

    async def _send(
        self,
        notification: Notification,
        users: TenantUsers,
        *,
        pull: bool,
        route: Route,
        arrived_ms: int = 0,
    ) -> Published:
        """`_place`, then its routing recorded (store/traces/writer.py); tracing on, as a
        `notifyhub.publish` span whose context the doorbells carry to the streams
        (store/doorbells.py). `arrived_ms`: a scheduled notification's delivery, which its
        copies sort by (`publish_scheduled`)."""
        if not self._tracing.enabled:
            return await self._place(
                notification, users, pull=pull, trace=None, route=route, arrived_ms=arrived_ms
            )
        attributes: Attributes = {
            "notifyhub.tenant": notification.tenant,
            "notifyhub.notification.id": notification.id,
            "notifyhub.users": len(users),
        }
        tracing = self._tracing
        with tracing.span("notifyhub.publish", attributes, kind="producer") as span:
            trace = tracing.traceparent()
            published = await self._place(
                notification, users, pull=pull, trace=trace, route=route, arrived_ms=arrived_ms
            )
            span.set_attribute("notifyhub.recipients", published.recipients)
        return published

    async def _place(
        self,
        notification: Notification,
        users: TenantUsers,
        *,
        pull: bool,
        trace: bytes | None,
        route: Route,
        arrived_ms: int = 0,
    ) -> Published:
        """Write copies batch by batch, two batches in flight so Python and Redis overlap;
        a big inlinable broadcast is announced to streams first
        (store/inbox/announcing.py `announce`). Each batch's copies are created as it is
        written (`arriving_now`), so a `since` poller that moved past the notification's
        time meanwhile still gets it, once. Each batch written renews the request's
        deadline: a fan-out longer than the deadline is not cut short while its round
        trips keep ending (notifyhub/deadline.py). A deferred one (`limits.defer_fanout_at`
        users or more) answers once its recipient index is written and its streams told;
        its copies are placed after (services/fanouts.py).

        The count returned is of users who hold the notification now: those whose
        preferences drop its category are not counted (of a deferred one, every user
        named: its batches apply preferences later)."""
        if self.durable is not None:  # durable inbox mode: committed before any copy
            await self.durable.write(notification, users, pull=pull)
        limits = self._settings.limits
        if 0 < limits.defer_fanout_at <= len(users) and self.fanouts is not None:
            return await self._defer(notification, users, pull=pull, trace=trace, route=route)
        if 0 < limits.announce_at <= len(users):  # streams hear of it before every copy
            await self._store.announce(notification, users, pull=pull)
        batch = limits.fanout_batch
        views = self._views.known(notification.tenant) if self._views is not None else None
        if len(users) <= batch:  # the common case: one round trip, no tasks
            placement = await self._store.placement(
                notification, users, pull=pull, trace=trace, views=views, arrived_ms=arrived_ms
            )
        else:
            in_flight = asyncio.Semaphore(2)

            async def place(chunk: TenantUsers) -> Placement:
                async with in_flight:
                    arriving = arriving_now(notification)
                    placed = await self._store.placement(
                        arriving,
                        chunk,
                        pull=pull,
                        trace=trace,
                        views=views,
                        arrived_ms=arrival_ms(arriving),
                    )
                request_deadline.renew()
                return placed

            chunks = [users[i : i + batch] for i in range(0, len(users), batch)]
            results = await asyncio.gather(*map(place, chunks))
            placement = _joined(results, batch)
        seqs = placement.seqs
        dropped = seqs.count(-1)  # (counted in C: a 100k fan-out's seqs)
        self._metrics.notifications_ingested_total.inc()
        self._metrics.notification_copies_total.inc(len(seqs) - dropped - seqs.count(0))
        await self._record_route(notification, route, users, placement)
        return Published(id=notification.id, recipients=len(seqs) - dropped)

    async def _defer(
        self,
        notification: Notification,
        users: TenantUsers,
        *,
        pull: bool,
        trace: bytes | None,
        route: Route,
    ) -> Published:
        """A deferred fan-out: its recipient index and its streams' announcement
        (store/inbox/announcing.py `announce_deferred`; the other processes announce it to
        their own streams), its routing trace (`pending` for every user: their preferences
        apply as their batch is written), its placement record, then the answer; its
        pending copies are written after, paced (services/fanouts.py), the first batch
        once the answer is on its way, each batch's copies created as it is written (a
        scheduled one's too: it is written after the delivery)."""
        assert self.fanouts is not None
        await self._store.announce_deferred(notification, users, pull=pull)
        self._metrics.notifications_ingested_total.inc()
        await self._record_route(notification, route, users, None)  # all pending
        await self.fanouts.start(notification, len(users), pull=pull, trace=trace)
        return Published(id=notification.id, recipients=len(users))

    async def _record_route(
        self,
        notification: Notification,
        route: Route,
        users: TenantUsers,
        placement: Placement | None,
    ) -> None:
        """The routing trace, after the copies (`placement` None: a deferred fan-out's, its
        users all pending): a failure to write it is logged, never the publish's (its
        copies are stored; a retry would publish it twice)."""
        if self._routing is None:
            return
        try:
            await self._routing.record(notification, route, users, placement)
        except RedisError as exc:
            log.warning("routing trace of %s not recorded: %s", notification.id, exc)


def _joined(results: list[Placement], batch: int) -> Placement:
    """The placements of consecutive batches of `batch` users as one (their lists joined
    in C, not per user)."""
    seqs: list[int] = []
    dropped: list[int] = []
    pushed_out: dict[int, PushedOut] = {}
    for start, result in zip(range(0, batch * len(results), batch), results, strict=True):
        seqs += result.seqs
        dropped += result.dropped
        pushed_out.update({start + i: out for i, out in result.pushed_out.items()})
    return Placement(seqs, dropped, pushed_out)


def _one_group(recipients: Recipients) -> bool:
    """Whether `recipients` names one group and nothing else."""
    return len(recipients.groups) == 1 and not (recipients.users or recipients.topics)


def _check_tenant(principal: ServicePrincipal, tenant: str) -> None:
    if not principal.may_act_on(tenant):
        raise PermissionDenied(f"this API key may not act on tenant {tenant}")
