"""E-mail deliveries: a message rendered from the delivery's payload, sent over kept SMTP
connections (a small pool), with a `Message-ID` derived from the delivery id."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from email import quoprimime
from email.header import Header
from email.utils import formatdate, parseaddr
from typing import Any

import aiosmtplib

from notifyhub.domain.delivery import Outcome
from notifyhub.services.templates import RenderError, render, render_html
from notifyhub.settings import DeliverySettings

POOL_SIZE = 4
"""Kept SMTP connections at most; sends beyond them wait for one to come back."""


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
    if not isinstance(found, list):
        raise BadAddress(f"`to`: an address or a list of addresses, not {type(named).__name__}")
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
    domain = _idna(domain)
    return f"{_header('To', local)}@{domain if domain.isascii() else _header('To', domain)}"


def _idna(domain: str) -> str:
    """`domain` in IDNA form, or as it is where it is not a valid IDN."""
    try:
        return domain if domain.isascii() else domain.encode("idna").decode()
    except UnicodeError:
        return domain


def envelope(address: str) -> str:
    """An address as `MAIL FROM`/`RCPT TO` give it: the domain in IDNA form (a non-ASCII
    local part stays as it is, and the transaction asks for SMTPUTF8). A sender setting
    without a domain goes as it is."""
    local, at, domain = address.rpartition("@")
    return f"{local}@{_idna(domain)}" if at else address


MAX_LINE = 78
"""Header lines longer than this are folded (RFC 5322's recommended limit)."""
CRLF = "\r\n"


def _line(name: str, value: str) -> bytes:
    """`Name: value` and its line break: a non-ASCII value as UTF-8 encoded words, and a
    long one folded, both by `Header` (as the stdlib's generator writes them). No value
    here holds a line break (`recipients` checks addresses; the subject's whitespace is
    collapsed)."""
    if value.isascii() and len(name) + 2 + len(value) <= MAX_LINE:
        return f"{name}: {value}{CRLF}".encode()
    header = Header(value, None if value.isascii() else "utf-8", header_name=name)
    return f"{name}: {header.encode(linesep=CRLF, maxlinelen=MAX_LINE)}{CRLF}".encode()


_PART = 'Content-Type: text/{}; charset="utf-8"\r\nContent-Transfer-Encoding: quoted-printable'


def _part(text: str, subtype: str) -> bytes:
    """A text part's headers and body: UTF-8, quoted-printable (readable, and 7-bit
    clean for any server)."""
    body = quoprimime.body_encode(text.encode().decode("latin-1"), eol=CRLF)
    return f"{_PART.format(subtype)}{CRLF}{CRLF}{body}".encode()


@dataclass(frozen=True, slots=True)
class Mail:
    """One SMTP transaction: the envelope and the message as it goes after `DATA`."""

    sender: str
    recipients: list[str]
    data: bytes


def build(sender: str, delivery_id: str, target: dict[str, Any], payload: dict[str, Any]) -> Mail:
    """The message: plain text always, an HTML alternative when the template has one
    (raises `RenderError` for a template that fails on this payload, `BadAddress` for a
    payload's recipient that is not an address).

    Written here, header by header, not by the stdlib's `email` generator: its MIME
    classes, its header folding and aiosmtplib reading the addresses back were about
    40% of the hub's CPU per e-mail (docs/benchmarks.md, the digests row's notes). The
    message is small and fixed: six headers, one or two quoted-printable text parts; a
    long or non-ASCII header is folded and encoded by `Header`, as the generator does."""
    to = recipients(target, payload)
    chosen = _templates(target, payload)
    context = {**payload, "payload": payload, "delivery_id": delivery_id}
    text = _part(render(chosen["text"], context), "plain")
    subject = " ".join(render(chosen["subject"], context).split())
    head = [
        _line("From", _address(sender)),
        _line("To", ", ".join(_address(a) for a in to)),
        _line("Subject", subject),
        _line("Date", formatdate()),
        _line("Message-ID", message_id(delivery_id)),
        b"MIME-Version: 1.0\r\n",
    ]
    if chosen.get("html"):
        html = _part(render_html(chosen["html"], context), "html")
        # "=_" never occurs in quoted-printable text: the boundary cannot occur in a part
        boundary = f"=_notifyhub_{delivery_id}".encode()
        head.append(b'Content-Type: multipart/alternative; boundary="%s"\r\n\r\n' % boundary)
        fence = b"--%s" % boundary  # each after a line break, which belongs to it
        body = b"\r\n".join((fence, text, fence, html, fence + b"--\r\n"))
    else:
        body = text
    return Mail(envelope(sender), [envelope(a) for a in to], b"".join(head) + body)


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

    async def _send_on(self, client: aiosmtplib.SMTP, mail: Mail) -> None:
        # a non-ASCII local part needs the server's SMTPUTF8 (without it aiosmtplib
        # refuses before MAIL: SMTPNotSupported, a retry as any missing feature is)
        utf8 = not (mail.sender.isascii() and all(a.isascii() for a in mail.recipients))
        try:
            await client.sendmail(
                mail.sender, mail.recipients, mail.data, mail_options=["SMTPUTF8"] if utf8 else []
            )
        except BaseException:
            client.close()
            raise
        self._idle.append(client)

    async def send(self, mail: Mail) -> None:
        """Send on a kept connection (or a new one); raises what aiosmtplib raises."""
        async with self._slots:
            kept = self._idle.pop() if self._idle else None
            if kept is not None and kept.is_connected:
                try:
                    await self._send_on(kept, mail)
                except aiosmtplib.SMTPServerDisconnected:
                    pass  # most likely closed while idle: once more on a new connection
                else:
                    return
            await self._send_on(await self._connect(), mail)

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
            mail = build(self._settings.smtp_sender, delivery_id, target, payload)
        except BadAddress as exc:
            return Outcome(None, str(exc), 0.0, final=True)
        except RenderError as exc:
            return Outcome(None, f"template: {exc}", 0.0, final=True)
        if not mail.recipients:
            error = "no recipients: the definition names none and the payload has no `to`"
            return Outcome(None, error, 0.0, final=True)
        try:
            async with asyncio.timeout(timeout_s or self._settings.smtp_timeout_s * 2):
                await self._pool.send(mail)
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
            return _failure(exc, started)
        return Outcome(250, None, time.monotonic() - started, accepted=True)

    async def aclose(self) -> None:
        await self._pool.aclose()
