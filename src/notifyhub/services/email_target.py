"""E-mail deliveries: a message rendered from the delivery's payload, sent over kept SMTP
connections (a small pool), with a `Message-ID` derived from the delivery id."""

from __future__ import annotations

import asyncio
import re
import time
from email.charset import QP, Charset
from email.header import Header
from email.message import Message
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from email.utils import parseaddr
from typing import Any

import aiosmtplib

from notifyhub.domain.delivery import Outcome
from notifyhub.services.templates import RenderError, render, render_html
from notifyhub.settings import DeliverySettings

POOL_SIZE = 4
"""Kept SMTP connections at most; sends beyond them wait for one to come back."""

_UTF8_QP = Charset("utf-8")
_UTF8_QP.body_encoding = QP


def message_id(delivery_id: str) -> str:
    """The `Message-ID` of every attempt of a delivery: a re-send after an unknown outcome
    is recognisable as the same message."""
    return f"<{delivery_id}@notifyhub>"


ADDRESS = re.compile(r"[^@\s]+@[^@\s]+")
"""What the API takes as an e-mail address (api/schemas/deliveries.py `Email`): no
whitespace, so no line break can reach a header."""
MAX_ADDRESS = 254


def is_address(text: str) -> bool:
    """Whether `text` is one e-mail address that reaches the server as written: no
    whitespace (no line break can reach a header), and read by `parseaddr` (which
    aiosmtplib's `RCPT TO` uses) as itself: `a,b@x.test` would go to a mailbox `a`."""
    return len(text) <= MAX_ADDRESS and bool(ADDRESS.fullmatch(text)) and parseaddr(text)[1] == text


def recipients(target: dict[str, Any], payload: dict[str, Any]) -> list[str]:
    """The definition's own `to`, else the payload's `to` (one address or a list).

    A payload's addresses were not checked when the delivery was made: one that is not
    an address (a line break would write headers of its own) is refused here, and the
    delivery ends (`BadAddress`)."""
    named = target.get("to") or payload.get("to") or []
    found = [named] if isinstance(named, str) else named
    chosen = [str(address) for address in found if isinstance(address, str) and address]
    for address in chosen:
        if not is_address(address):
            raise BadAddress(f"`to`: {address[:80]!r} is not an e-mail address")
    return chosen


class BadAddress(ValueError):
    """A recipient that is not an e-mail address (from a delivery's payload)."""


def _templates(target: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """The payload's `locale`'s message where the definition has one (whole: its own
    subject, text and html), else the definition's own."""
    locale = payload.get("locale")
    by_locale = target.get("locales") or {}
    if isinstance(locale, str):
        for tag in (locale, locale.split("-")[0]):
            if tag in by_locale:
                return dict(by_locale[tag])
    return target


def _header(name: str, value: str) -> str:
    """ASCII as it is; anything else as UTF-8 encoded words."""
    return value if value.isascii() else Header(value, "utf-8", header_name=name).encode()


def _address(address: str) -> str:
    """A non-ASCII domain in IDNA form; a non-ASCII local part as an encoded word (as
    `EmailMessage` writes it: servers without SMTPUTF8 take no better)."""
    if address.isascii():
        return address
    local, _, domain = address.rpartition("@")
    if not domain.isascii():
        try:
            domain = domain.encode("idna").decode()
        except UnicodeError:  # not a valid IDN: as the local part, then
            domain = _header("To", domain)
    return f"{_header('To', local)}@{domain}"


def _part(text: str, subtype: str) -> MIMENonMultipart:
    """UTF-8, quoted-printable: readable, and 7-bit clean for any server."""
    part = MIMENonMultipart("text", subtype, charset="utf-8")
    part.set_payload(text, _UTF8_QP)
    return part


def build(
    sender: str, delivery_id: str, target: dict[str, Any], payload: dict[str, Any]
) -> Message:
    """The message: plain text always, an HTML alternative when the template has one
    (raises `RenderError` for a template that fails on this payload).

    Built on the stdlib's compat32 classes: `EmailMessage` parses and re-folds every
    header it is given, 15x the time (450 us a message, half the hub's cost per e-mail
    in the bench's profile)."""
    chosen = _templates(target, payload)
    context = {**payload, "payload": payload, "delivery_id": delivery_id}
    message: Message = _part(render(chosen["text"], context), "plain")
    if chosen.get("html"):
        html = _part(render_html(chosen["html"], context), "html")
        message = MIMEMultipart("alternative", _subparts=[message, html])
    message["From"] = _address(sender)
    message["To"] = ", ".join(_address(a) for a in recipients(target, payload))
    message["Subject"] = _header("Subject", " ".join(render(chosen["subject"], context).split()))
    message["Message-ID"] = message_id(delivery_id)
    return message


def smtp_options(s: DeliverySettings) -> dict[str, Any]:
    """aiosmtplib's connection options from the settings: the e-mail target's pool and
    the alert e-mails connect alike."""
    return {
        "hostname": s.smtp_host,
        "port": s.smtp_port,
        "username": s.smtp_username,
        "password": s.smtp_password.get_secret_value() if s.smtp_password else None,
        "use_tls": s.smtp_tls,
        "start_tls": s.smtp_starttls,
        "timeout": s.smtp_timeout_s,
    }


def _refused(exc: aiosmtplib.SMTPException) -> tuple[int | None, str]:
    """The server's code and reply (the first refused recipient's when all were)."""
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused) and exc.recipients:
        first = exc.recipients[0]
        return first.code, f"{first.recipient}: {first.message}"
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        return exc.code, exc.message
    return None, str(exc)


def _failure(exc: Exception, started: float) -> Outcome:
    """5xx is final (the server's reply in history); 4xx and network errors retry."""
    duration_s = time.monotonic() - started
    if isinstance(exc, aiosmtplib.SMTPException):
        code, reply = _refused(exc)
        error = f"SMTP {code} {reply}" if code is not None else f"SMTP error: {reply}"
        final = code is not None and 500 <= code < 600
        return Outcome(code, error[:1000], duration_s, final=final)
    return Outcome(None, f"SMTP connection failed: {exc or type(exc).__name__}", duration_s)


class SmtpPool:
    """Up to POOL_SIZE kept connections to the settings' SMTP server (TLS or STARTTLS and
    auth as configured); a kept one the server closed meanwhile is replaced once."""

    def __init__(self, settings: DeliverySettings, size: int = POOL_SIZE) -> None:
        self._settings = settings
        self._idle: list[aiosmtplib.SMTP] = []
        self._slots = asyncio.Semaphore(size)

    async def _connect(self) -> aiosmtplib.SMTP:
        client = aiosmtplib.SMTP(**smtp_options(self._settings))
        await client.connect()
        return client

    async def _send_on(self, client: aiosmtplib.SMTP, message: Message, to: list[str]) -> None:
        try:
            await client.send_message(message, recipients=to)
        except BaseException:
            client.close()
            raise
        self._idle.append(client)

    async def send(self, message: Message, to: list[str]) -> None:
        """Send on a kept connection (or a new one); raises what aiosmtplib raises."""
        async with self._slots:
            kept = self._idle.pop() if self._idle else None
            if kept is not None and kept.is_connected:
                try:
                    await self._send_on(kept, message, to)
                except aiosmtplib.SMTPServerDisconnected:
                    pass  # most likely closed while idle: once more on a new connection
                else:
                    return
            await self._send_on(await self._connect(), message, to)

    async def aclose(self) -> None:
        while self._idle:
            self._idle.pop().close()


class EmailTarget:
    """Sends one e-mail delivery attempt and says what came of it."""

    def __init__(self, settings: DeliverySettings, pool: SmtpPool | None = None) -> None:
        self._settings = settings
        self._pool = pool or SmtpPool(settings)

    async def send(
        self,
        delivery_id: str,
        target: dict[str, Any],
        payload: dict[str, Any],
        timeout_s: float | None = None,
    ) -> Outcome:
        started = time.monotonic()
        try:
            to = recipients(target, payload)
        except BadAddress as exc:
            return Outcome(None, str(exc), 0.0, final=True)
        if not to:
            error = "no recipients: the definition names none and the payload has no `to`"
            return Outcome(None, error, 0.0, final=True)
        try:
            message = build(self._settings.smtp_sender, delivery_id, target, payload)
        except RenderError as exc:
            return Outcome(None, f"template: {exc}", 0.0, final=True)
        try:
            async with asyncio.timeout(timeout_s or self._settings.smtp_timeout_s * 2):
                await self._pool.send(message, to)
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            return _failure(exc, started)
        return Outcome(250, None, time.monotonic() - started, accepted=True)

    async def aclose(self) -> None:
        await self._pool.aclose()
