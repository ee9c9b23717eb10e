"""RabbitMQ deliveries: the payload published with publisher confirms over one robust
connection per AMQP URL (recovered after a broker restart), `message_id` = delivery id."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aio_pika
import orjson
from aio_pika.abc import AbstractRobustChannel, AbstractRobustConnection
from aio_pika.exceptions import AMQPError, DeliveryError

from notifyhub.domain.delivery import Outcome

CONFIRM_TIMEOUT_S = 10.0
"""No confirm within this (or the definition's `timeout_s`): the attempt failed and is
retried (the broker may still have it: the re-send carries the same `message_id`)."""


def message(delivery_id: str, tenant: str, definition: str, payload: Any) -> aio_pika.Message:
    """A persistent JSON message; headers name the tenant and the definition."""
    return aio_pika.Message(
        orjson.dumps(payload),
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=delivery_id,
        headers={"notifyhub-tenant": tenant, "notifyhub-definition": definition},
    )


def _error(exc: Exception, opened: bool, limit_s: float) -> str:
    """What the attempt's history says: a time-out names what was waited for (the
    channel, or the broker's confirm of the publish)."""
    if isinstance(exc, DeliveryError):
        return f"broker refused: {exc}"[:1000]
    if isinstance(exc, TimeoutError):
        waited = "publisher confirm" if opened else "connection to the broker"
        return f"AMQP: no {waited} within {limit_s:g}s"
    return f"AMQP: {exc or type(exc).__name__}"[:1000]


class RabbitTarget:
    """Publishes one delivery attempt and says what the broker's confirm was. The
    connection and its channel are made on first use and kept."""

    def __init__(self, url: str | None, confirm_timeout_s: float = CONFIRM_TIMEOUT_S) -> None:
        self._url = url
        self._confirm_timeout_s = confirm_timeout_s
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractRobustChannel | None = None
        self._lock = asyncio.Lock()

    async def _open(self, url: str) -> AbstractRobustChannel:
        async with self._lock:
            if self._channel is not None and not self._channel.is_closed:
                return self._channel
            if self._connection is None or self._connection.is_closed:
                self._connection = await aio_pika.connect_robust(url, timeout=5)
            channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
            self._channel = channel
            return channel

    async def send(
        self,
        delivery_id: str,
        tenant: str,
        definition: str,
        target: dict[str, Any],
        payload: Any,
        timeout_s: float | None = None,
    ) -> Outcome:
        """An ack settles the attempt; a nack, a returned message, no confirm in time or
        a broker out of reach fails it (retried on the definition's schedule)."""
        if self._url is None:
            return Outcome(None, "no AMQP URL: set NOTIFYHUB_AMQP_URL", 0.0)
        started = time.monotonic()
        limit_s = timeout_s or self._confirm_timeout_s
        opened = False
        try:
            async with asyncio.timeout(limit_s):
                channel = await self._open(self._url)
                opened = True
                exchange = await channel.get_exchange(target["exchange"], ensure=False)
                await exchange.publish(
                    message(delivery_id, tenant, definition, payload),
                    routing_key=target.get("routing_key", ""),
                    mandatory=True,
                )
        except (DeliveryError, TimeoutError, AMQPError, OSError, ConnectionError) as exc:
            return Outcome(None, _error(exc, opened, limit_s), time.monotonic() - started)
        return Outcome(None, None, time.monotonic() - started, accepted=True)

    async def aclose(self) -> None:
        if self._connection is not None:
            await self._connection.close()
        self._connection = self._channel = None
