"""Rules (Design 3, docs/origins.md): relationships subscribe users; events render, publish."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession
from ulid import ULID

from notifyhub.db.models import Relationship, Rule, RuleRecipient
from notifyhub.db.repositories import rules as repo
from notifyhub.db.repositories.rules import SubscriptionKey
from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.digest import Digest
from notifyhub.domain.digest import thread_key as digest_thread_key
from notifyhub.domain.escalation import Step
from notifyhub.domain.notification import Actor, Draft, Ref, extra_channels
from notifyhub.errors import InvalidInput, NotFound
from notifyhub.metrics import Metrics
from notifyhub.services import locales, templates
from notifyhub.services.ingest import IngestService

log = logging.getLogger(__name__)

SELF = "self"


@dataclass(frozen=True, slots=True)
class RecipientSpec:
    relationship: str
    obtain: Literal["push", "pull"]
    title: str
    body: str = ""
    thread_key: str | None = None
    """A template: the notifications' thread key (e.g. `{{ target.type }}:{{ target.id }}`)."""
    locales: dict[str, dict[str, str]] | None = None
    """Translations: {locale: {"title": ..., "body": ...}} templates (services/locales.py)."""

    @classmethod
    def of(cls, source: Any) -> RecipientSpec:
        """From anything with the same attributes: a request's, or a stored row."""
        obtain: Literal["push", "pull"] = "pull" if source.obtain == "pull" else "push"
        found = source.locales
        locales = None
        if found:
            locales = {
                tag: t if isinstance(t, dict) else {"title": t.title, "body": t.body}
                for tag, t in found.items()
            }
        return cls(
            source.relationship, obtain, source.title, source.body, source.thread_key, locales
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "relationship": self.relationship,
            "obtain": self.obtain,
            "title": self.title,
            "body": self.body,
            "thread_key": self.thread_key,
            "locales": self.locales,
        }


@dataclass(frozen=True, slots=True)
class RuleDefinition:
    name: str
    target_type: str
    recipients: list[RecipientSpec]
    channels: tuple[str, ...] = ()
    """The channels beyond the inbox its notifications reach (`email`, `push`)."""
    digest: Digest | None = None
    """Its notifications' digest (domain/digest.py), if any."""
    escalate: tuple[Step, ...] = ()
    """Its notifications' escalation steps (services/escalation.py)."""

    @classmethod
    def of(cls, rule: Rule, recipients: Sequence[RuleRecipient]) -> RuleDefinition:
        """The rule as stored: its row and its recipients' rows."""
        return cls(
            rule.name,
            rule.target_type,
            [RecipientSpec.of(r) for r in recipients],
            tuple(rule.channels),
            digest=Digest.model_validate(rule.digest) if rule.digest else None,
            escalate=tuple(Step.model_validate(s) for s in rule.escalate),
        )

    @property
    def channels_json(self) -> list[str]:
        """`channels` as the API shows them: the inbox first, always."""
        return ["inbox", *self.channels]


@dataclass(frozen=True, slots=True)
class Event:
    tenant: str
    rule: str
    actor: Actor
    target: Ref
    data: dict[str, JsonValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EventResult:
    event_id: str
    notifications: int
    recipients: int
    errors: list[str]


@dataclass(frozen=True, slots=True)
class Subscription:
    rule: str
    target: Ref
    relationship: str
    obtain: str


class RuleService:
    def __init__(self, ingest: IngestService, metrics: Metrics) -> None:
        self._ingest = ingest
        self._metrics = metrics

    async def put(self, session: AsyncSession, tenant: str, definition: RuleDefinition) -> bool:
        """Create or replace a rule; every template must compile (else 422)."""
        _check_templates(definition)
        digest = definition.digest.model_dump() if definition.digest else None
        rule_id, created = await repo.upsert(
            session,
            tenant,
            definition.name,
            definition.target_type,
            definition.channels,
            digest=digest,
            escalate=[s.model_dump() for s in definition.escalate],
        )
        specs = [
            RuleRecipient(
                rule_id=rule_id,
                relationship=s.relationship,
                obtain=s.obtain,
                title=s.title,
                body=s.body,
                thread_key=s.thread_key,
                locales=s.locales,
            )
            for s in definition.recipients
        ]
        await repo.set_recipients(session, rule_id, specs)
        return created

    async def get(self, session: AsyncSession, tenant: str, name: str) -> RuleDefinition:
        rule = await repo.find(session, tenant, name)
        if rule is None:
            raise NotFound(f"no rule {name} in tenant {tenant}")
        return RuleDefinition.of(rule, await repo.recipients(session, rule.id))

    async def delete(self, session: AsyncSession, tenant: str, name: str) -> None:
        if not await repo.drop(session, tenant, name):
            raise NotFound(f"no rule {name} in tenant {tenant}")

    async def relate(self, session: AsyncSession, row: Relationship) -> None:
        await repo.relate(session, row)
        await repo.clear_opt_outs(session, row)

    async def unrelate(self, session: AsyncSession, row: Relationship) -> None:
        if not await repo.unrelate(session, row):
            raise NotFound("no such relationship")

    async def fire(self, session: AsyncSession, event: Event) -> EventResult:
        """Render the rule per relationship and publish; a user in several relationships
        gets the first matching message only; the actor is not told of their own action."""
        rule = await repo.find(session, event.tenant, event.rule)
        if rule is None:
            raise InvalidInput(f"unknown rule: {event.rule}")
        if event.target.type != rule.target_type:
            raise InvalidInput(f"target.type: rule {rule.name} applies to {rule.target_type}")
        context = _context(event)
        reached: set[str] = set()
        notifications, recipients, errors = 0, 0, []
        budget = templates.Budget()  # one for the event's templates: its loop time is bounded
        for row in await repo.recipients(session, rule.id):
            spec = RecipientSpec.of(row)
            users = [u for u in await self._users(session, rule, row, event) if u not in reached]
            if not users:
                continue
            translations = spec.locales or {}
            groups = await locales.group_users(session, event.tenant, users, translations)
            for tag, group in groups.items():
                try:
                    draft = self._draft(rule, spec, tag, event, context, budget)
                except templates.RenderError as exc:
                    where = spec.relationship + (f" ({tag})" if tag else "")
                    errors.append(f"{where}: {exc}")
                    log.warning("rule %s: template for %s failed: %s", rule.name, where, exc)
                    continue
                pull = spec.obtain == "pull"
                origin = f"rule:{rule.name}"  # the recipients' source in the routing trace
                accepted = await self._ingest.send(
                    draft, group, pull=pull, origin=origin, session=session
                )
                reached.update(group)
                notifications += 1
                recipients += accepted.recipients
        return EventResult(str(ULID()), notifications, recipients, errors)

    async def _users(
        self, session: AsyncSession, rule: Rule, spec: RuleRecipient, event: Event
    ) -> list[str]:
        if spec.relationship == SELF:
            return [event.actor.id] if event.actor.type == "user" else []
        users = await repo.related_users(session, rule, event.target.id, spec.relationship)
        return [u for u in users if not (event.actor.type == "user" and u == event.actor.id)]

    @staticmethod
    def _draft(
        rule: Rule,
        spec: RecipientSpec,
        locale: str | None,
        event: Event,
        context: dict[str, Any],
        budget: templates.Budget,
    ) -> Draft:
        """The notification for users of `spec`'s relationship who get its `locale`
        translation (None: the default)."""
        text = (spec.locales or {}).get(locale or "") or {"title": spec.title, "body": spec.body}
        title, body = _render(rule.name, text["title"], text.get("body", ""), context, budget)
        thread_key = _render_thread_key(spec.thread_key, context, budget)
        digest = Digest.model_validate(rule.digest) if rule.digest else None
        if digest is not None and thread_key is None:
            thread_key = digest_thread_key(digest.key)
        return Draft(
            tenant=event.tenant,
            title=title,
            body=body,
            thread_key=thread_key,
            category=rule.name,
            source=f"rule:{rule.name}",
            channels=extra_channels(rule.channels),
            digest=digest,
            escalate=tuple(Step.model_validate(s) for s in rule.escalate),
            actor=event.actor,
            target=event.target,
            data=event.data,
        )

    async def subscriptions(
        self,
        session: AsyncSession,
        me: UserPrincipal,
        after: SubscriptionKey | None = None,
        limit: int | None = None,
    ) -> list[Subscription]:
        """The user's subscriptions by (rule, target id, relationship): the first `limit`
        after `after` (None: from the first, all)."""
        rows = await repo.subscriptions(session, me.tenant, me.user, after, limit)
        return [
            Subscription(rule, Ref(type=tt, id=ti), rel, obtain)
            for rule, tt, ti, rel, obtain in rows
        ]

    async def cancel(
        self, session: AsyncSession, me: UserPrincipal, rule_name: str, target: Ref
    ) -> None:
        current = [
            s
            for s in await self.subscriptions(session, me)
            if s.rule == rule_name and s.target == target
        ]
        if not current:
            raise NotFound(f"no subscription to {rule_name} on {target.type}/{target.id}")
        rule = await repo.find(session, me.tenant, rule_name)
        assert rule is not None
        await repo.opt_out(session, me.tenant, me.user, rule.id, target.id)


@dataclass(frozen=True, slots=True)
class Rendered:
    """One relationship's message for a sample event, or why its template failed."""

    relationship: str
    obtain: Literal["push", "pull"]
    title: str
    body: str
    error: str | None = None


def preview(definition: RuleDefinition, event: Event) -> list[Rendered]:
    """Each relationship's message for a sample event, as `fire` renders it (the same
    sandbox and budget; a title rendering empty falls back to the rule's name), stored
    and sent nowhere. A template that does not compile is a 422, as on save."""
    _check_templates(definition)
    context, budget = _context(event), templates.Budget()
    rendered = []
    for spec in definition.recipients:
        try:
            title, body = _render(definition.name, spec.title, spec.body, context, budget)
        except templates.RenderError as exc:
            rendered.append(Rendered(spec.relationship, spec.obtain, "", "", str(exc)))
            continue
        rendered.append(Rendered(spec.relationship, spec.obtain, title, body))
    return rendered


def _context(event: Event) -> dict[str, Any]:
    """What a rule's templates see of an event."""
    return {
        "actor": event.actor.model_dump(),
        "target": event.target.model_dump(),
        "data": event.data,
    }


def _render(
    rule: str, title: str, body: str, context: dict[str, Any], budget: templates.Budget
) -> tuple[str, str]:
    """A relationship's title and body for an event (`templates.render_message`; a title
    rendering empty is the rule's name); RenderError when a template fails."""
    rendered_title, rendered_body = templates.render_message(title, body, context, budget)
    return rendered_title or rule, rendered_body


THREAD_KEY = re.compile(r"[A-Za-z0-9._:/@-]{1,200}")


def _render_thread_key(
    template: str | None, context: dict[str, Any], budget: templates.Budget
) -> str | None:
    """The rendered thread key (None: no template, or it rendered empty); RenderError when
    it is not a thread key (1-200 of A-Z a-z 0-9 . _ : / @ -)."""
    if not template:
        return None
    key = templates.render(template, context, budget).strip()
    if key and not THREAD_KEY.fullmatch(key):
        raise templates.RenderError(f"thread_key rendered {key[:60]!r}: not a thread key")
    return key or None


def _check_templates(definition: RuleDefinition) -> None:
    for i, spec in enumerate(definition.recipients):
        templates.check(spec.title, f"recipients.{i}.title")
        templates.check(spec.body, f"recipients.{i}.body")
        if spec.thread_key:
            templates.check(spec.thread_key, f"recipients.{i}.thread_key")
        for tag, text in (spec.locales or {}).items():
            templates.check(text["title"], f"recipients.{i}.locales.{tag}.title")
            templates.check(text.get("body", ""), f"recipients.{i}.locales.{tag}.body")


def relationship_row(tenant: str, user: str, relationship: str, target: Ref) -> Relationship:
    return Relationship(
        tenant=tenant,
        target_type=target.type,
        target_id=target.id,
        relationship=relationship,
        user_id=user,
    )
