"""A real SMTP server on loopback for the e-mail tests (aiosmtpd, its own thread), and
the settings that send a hub's e-mails to it."""

from __future__ import annotations

from collections import defaultdict, deque
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
    """Keeps every accepted message; answers DATA for a planned recipient with the next
    reply planned for it (`Smtp.refuse`), any other message with 250."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []
        self.replies: dict[str, deque[str]] = defaultdict(deque)
        self.refused: list[str] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = BytesParser(policy=default_policy).parsebytes(envelope.content)
        planned = next((self.replies[r] for r in envelope.rcpt_tos if self.replies.get(r)), None)
        if planned:
            self.refused.append(str(parsed["Message-ID"]))
            return planned.popleft()
        self.messages.append((list(envelope.rcpt_tos), parsed))
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
