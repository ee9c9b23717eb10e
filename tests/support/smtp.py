"""A real SMTP server on loopback for every test that sends e-mail (aiosmtpd, its own
thread), and the settings that send a hub's e-mails to it."""

from __future__ import annotations

import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from email.parser import BytesParser
from email.policy import default as default_policy
from typing import Any

from aiosmtpd.controller import Controller

from notifyhub.settings import DeliverySettings, Settings
from support.receiver import free_port


class _Handler:
    """Keeps every accepted message (its envelope recipients and the message) and when the
    first and the last came; answers DATA for a planned recipient with the next reply
    planned for it (`Smtp.refuse`), any other message with 250."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []
        self.replies: dict[str, deque[str]] = defaultdict(deque)
        self.refused: list[str] = []
        self.first_at: float | None = None
        self.last_at = 0.0
        """Wall-clock seconds of the first and the last accepted message."""

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = BytesParser(policy=default_policy).parsebytes(envelope.content)
        planned = next((q for r in envelope.rcpt_tos if (q := self.replies.get(r))), None)
        if planned:
            self.refused.append(str(parsed["Message-ID"]))
            return planned.popleft()
        self.messages.append((list(envelope.rcpt_tos), parsed))
        self.last_at = time.time()
        if self.first_at is None:
            self.first_at = self.last_at
        return "250 OK"


class Smtp:
    """A real aiosmtpd server on 127.0.0.1 (its own thread); `smtputf8`: whether it
    offers SMTPUTF8 (mailboxes with non-ASCII local parts)."""

    def __init__(self, smtputf8: bool = True) -> None:
        self.handler = _Handler()
        self.port = free_port()
        self._controller = Controller(
            self.handler, hostname="127.0.0.1", port=self.port, enable_SMTPUTF8=smtputf8
        )

    def refuse(self, recipient: str, *replies: str) -> None:
        """Answer the next messages to `recipient` with `replies`, one each. Keyed by
        recipient, not first come: a hub of the test may also send what an earlier test
        left owed in the shared database (an alert e-mail whose lease ran out)."""
        self.handler.replies[recipient].extend(replies)

    def of(self, delivery_id: str) -> list[tuple[list[str], Message]]:
        wanted = f"<{delivery_id}@notifyhub>"
        return [m for m in self.handler.messages if m[1]["Message-ID"] == wanted]

    @property
    def received(self) -> list[Message]:
        """Every accepted message, in the order they came (a copy: the server's thread
        keeps adding)."""
        return [message for _, message in list(self.handler.messages)]

    def count_by(self, header: str) -> Counter[str]:
        """Accepted messages per value of `header`: a `Message-ID` counted twice came twice."""
        return Counter(str(message[header]) for message in self.received)

    def per_recipient(self) -> Counter[str]:
        """Accepted messages per envelope recipient."""
        return Counter(r for rcpt, _ in list(self.handler.messages) for r in rcpt)


@contextmanager
def smtp_server(smtputf8: bool = True) -> Iterator[Smtp]:
    """A started server, stopped on exit."""
    server = Smtp(smtputf8)
    server._controller.start()
    try:
        yield server
    finally:
        server._controller.stop()


def smtp_settings(settings: Settings, smtp: Smtp, **deliveries: Any) -> Settings:
    """`settings` whose e-mails go to `smtp` and whose deliveries may reach 127.0.0.1
    (the test's SMTP server and push service); `deliveries` sets the rest."""
    found = DeliverySettings(
        allow_networks=["127.0.0.1/32"],
        smtp_port=smtp.port,
        smtp_sender="hub@notifyhub.test",
        **deliveries,
    )
    return settings.model_copy(update={"deliveries": found})
