"""Periodic producers: read-only SQL checks on an interval whose rows become notifications.

Implementers add producers by configuration, without code (the restock design's "scan
business tables for anomalies", docs/origins.md). Each row is rendered with the same
sandboxed templates as rules; a row whose dedupe key was notified within the window is
skipped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from notifyhub.db.engine import create_engine
from notifyhub.db.repositories import producer_claims as claims_repo
from notifyhub.db.unit import UnitOfWork
from notifyhub.domain.notification import Draft, Recipients, Severity
from notifyhub.errors import InvalidInput
from notifyhub.metrics import Metrics
from notifyhub.services import locales, templates
from notifyhub.services.ingest import IngestService
from notifyhub.services.locales import LOCALE, MAX_TRANSLATIONS
from notifyhub.store.keys import Keys
from notifyhub.store.lock import RedisLock
from notifyhub.workers.runner import Loop

log = logging.getLogger(__name__)

READ_ONLY = re.compile(r"^\s*(select|with)\b", re.IGNORECASE)
ENV_REF = re.compile(r"\$\{([A-Z0-9_]+)\}")
Token = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$")]


class RecipientsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[str] = []
    groups: list[Token] = []
    topics: list[Token] = []


class Translation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=1000)
    body: str = ""


class ProducerConfig(BaseModel):
    """One periodic check; `database_url` may reference `${ENV_VARS}`."""

    model_config = ConfigDict(extra="forbid")

    name: Token
    database_url: str
    query: str
    interval_s: float = Field(60.0, ge=1)
    statement_timeout_ms: int = Field(10_000, ge=100)
    max_rows: int = Field(1000, ge=1, le=100_000)
    tenant: str = "default"
    category: Token | None = None
    severity: Severity = Severity.INFO
    recipients: RecipientsConfig
    title: str = Field(min_length=1, max_length=1000)
    body: str = ""
    locales: dict[Annotated[str, Field(pattern=LOCALE)], Translation] = Field(
        default_factory=dict, max_length=MAX_TRANSLATIONS
    )
    """Translations of `title` and `body` by locale: each recipient gets the one their
    `locale` preference picks (`pt-BR` -> `pt` -> `title`/`body`)."""
    dedupe_columns: list[str] = Field(min_length=1)
    dedupe_window_s: int = Field(24 * 3600, ge=1)

    @field_validator("query")
    @classmethod
    def _read_only(cls, value: str) -> str:
        if not READ_ONLY.match(value) or ";" in value.strip().rstrip(";"):
            raise ValueError("must be a single SELECT (or WITH ... SELECT) statement")
        return value

    def resolved_url(self) -> str:
        return ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), self.database_url)


class ProducersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    producers: list[ProducerConfig]

    @field_validator("producers")
    @classmethod
    def _unique_names(cls, value: list[ProducerConfig]) -> list[ProducerConfig]:
        """A name keys its producer's lock, dedupe keys and loop: two would share them."""
        names = [p.name for p in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"producer names must be unique: {', '.join(twice)}")
        return value


def load(path: Path) -> list[ProducerConfig]:
    """Parse and validate a producers file, templates included (InvalidInput on error)."""
    try:  # (a directory, an unreadable file or one not in UTF-8: said so, not a traceback)
        parsed = ProducersFile.model_validate(yaml.safe_load(path.read_text("utf-8")) or {})
    except (yaml.YAMLError, ValidationError, OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path}: {exc}") from exc
    for producer in parsed.producers:
        templates.check(producer.title, f"{producer.name}.title")
        templates.check(producer.body, f"{producer.name}.body")
        for tag, translation in producer.locales.items():
            templates.check(translation.title, f"{producer.name}.locales.{tag}.title")
            templates.check(translation.body, f"{producer.name}.locales.{tag}.body")
    return parsed.producers


class Producer:
    """Runs one check: query (read-only, time-limited), dedupe, render, send."""

    def __init__(
        self,
        config: ProducerConfig,
        *,
        ingest: IngestService,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: Redis,
        keys: Keys,
        lock_ttl_ms: int,
        durable: bool = False,
    ) -> None:
        self.config = config
        self._ingest = ingest
        self._sessionmaker = sessionmaker
        self._lock = RedisLock(redis, keys.lock(f"producer:{config.name}"), lock_ttl_ms)
        self._claims: RedisClaims | DatabaseClaims = (
            DatabaseClaims(sessionmaker, config) if durable else RedisClaims(redis, keys, config)
        )
        """Where a notified row is claimed for the window: PostgreSQL in durable inbox
        mode (the inboxes come back from there after Redis loses its data, so must these),
        Redis otherwise."""
        self._engine: AsyncEngine | None = None

    async def run_once(self) -> int:
        """One pass; returns how many rows became notifications."""
        async with self._lock.hold() as held:
            if not held:
                return 0
            rows = await self._query()
            self._check_columns(rows)
            await self._claims.prune()
            sent = 0
            for row in rows:
                sent += await self._notify(row)
            return sent

    def _check_columns(self, rows: list[dict[str, Any]]) -> None:
        """Every dedupe column is among the query's columns (InvalidInput otherwise): a
        missing one would key every row alike, one notification for all of them."""
        if not rows:
            return
        missing = [c for c in self.config.dedupe_columns if c not in rows[0]]
        if missing:
            raise InvalidInput(
                f"producer {self.config.name}: dedupe_columns {', '.join(missing)} not among "
                f"the query's columns ({', '.join(rows[0])})"
            )

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()

    async def _query(self) -> list[dict[str, Any]]:
        if self._engine is None:
            self._engine = create_engine(self.config.resolved_url())
        async with self._engine.connect() as connection:
            await connection.execute(text("SET TRANSACTION READ ONLY"))
            timeout = int(self.config.statement_timeout_ms)
            await connection.execute(text(f"SET LOCAL statement_timeout = {timeout}"))
            # A server-side cursor: the hub reads `max_rows` rows, never the whole result
            result = await connection.stream(text(self.config.query))
            rows = [dict(row._mapping) for row in await result.fetchmany(self.config.max_rows)]
            await result.close()
            await connection.rollback()
        return rows

    async def _notify(self, row: dict[str, Any]) -> int:
        digest = self._digest(row)
        if not await self._claims.claim(digest):
            return 0  # notified within the window
        try:
            return await self._send(row)
        except BaseException:
            await self._claims.release(digest)  # not notified: the next run tries it again
            raise

    async def _send(self, row: dict[str, Any]) -> int:
        config = self.config
        context = {"row": orjson.loads(orjson.dumps(row, default=str))}
        recipients = Recipients(
            users=tuple(config.recipients.users),
            groups=tuple(config.recipients.groups),
            topics=tuple(config.recipients.topics),
        )
        origin = f"producer:{config.name}"  # the recipients' source in the routing trace
        async with UnitOfWork(self._sessionmaker) as unit:
            session = unit.session
            if not config.locales:
                draft = self._draft(config.title, config.body, context)
                if draft is not None:
                    await self._ingest.publish_internal(session, draft, recipients, origin=origin)
                return int(draft is not None)
            users = await self._ingest.resolve_internal(session, config.tenant, recipients)
            groups = await locales.group_users(session, config.tenant, users, config.locales)
        sent = 0
        for tag, group in groups.items():  # one notification per translation
            chosen = config.locales[tag] if tag is not None else config
            draft = self._draft(chosen.title, chosen.body, context)
            if draft is not None:
                await self._ingest.send(draft, group, origin=origin)
                sent = 1
        return sent

    def _draft(self, title: str, body: str, context: dict[str, Any]) -> Draft | None:
        """One row's notification from these templates; None when they fail (logged)."""
        config = self.config
        try:
            rendered, rendered_body = templates.render_message(title, body, context)
        except templates.RenderError as exc:
            log.warning("producer %s: template failed for a row: %s", config.name, exc)
            return None
        return Draft(
            tenant=config.tenant,
            title=rendered or config.name,
            body=rendered_body,
            category=config.category,
            severity=config.severity,
            source=f"producer:{config.name}",
            data=context["row"],
        )

    def _digest(self, row: dict[str, Any]) -> str:
        """What claims the row for the window: a hash of its dedupe columns' values."""
        values = [str(row.get(column)) for column in self.config.dedupe_columns]
        return hashlib.sha256("\x1f".join(values).encode()).hexdigest()


class RedisClaims:
    """A producer's notified rows as Redis keys that expire with its window."""

    def __init__(self, redis: Redis, keys: Keys, config: ProducerConfig) -> None:
        self._redis = redis
        self._keys = keys
        self._config = config

    async def claim(self, digest: str) -> bool:
        key = self._keys.producer_seen(self._config.name, digest)
        return bool(await self._redis.set(key, "1", nx=True, ex=self._config.dedupe_window_s))

    async def release(self, digest: str) -> None:
        await self._redis.delete(self._keys.producer_seen(self._config.name, digest))

    async def prune(self) -> None:
        """(Expired keys go by themselves.)"""


class DatabaseClaims:
    """A producer's notified rows in PostgreSQL (durable inbox mode), each until its
    window ends; expired ones are pruned at each run."""

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], config: ProducerConfig
    ) -> None:
        self._sessionmaker = sessionmaker
        self._config = config

    async def claim(self, digest: str) -> bool:
        config = self._config
        until = datetime.now(UTC) + timedelta(seconds=config.dedupe_window_s)
        async with UnitOfWork(self._sessionmaker) as unit:
            return await claims_repo.claim(unit.session, config.tenant, config.name, digest, until)

    async def release(self, digest: str) -> None:
        async with UnitOfWork(self._sessionmaker) as unit:
            await claims_repo.release(unit.session, self._config.name, digest)

    async def prune(self) -> None:
        async with UnitOfWork(self._sessionmaker) as unit:
            await claims_repo.prune(unit.session, self._config.name)


def loops(producers: list[Producer], metrics: Metrics) -> list[Loop]:
    """One loop per producer; a producer failing (its database down, its query broken)
    does not make the hub unready."""
    return [
        Loop(f"producer:{p.config.name}", p.config.interval_s, p.run_once, metrics, readiness=False)
        for p in producers
    ]
