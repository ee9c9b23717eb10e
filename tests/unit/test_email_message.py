"""The e-mail target's message as a server receives it: written by `email_target.build`,
parsed back as a mail client reads it."""

from __future__ import annotations

from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from typing import Any

import pytest

from notifyhub.services.email_target import BadAddress, build, recipients

ID = "01J0000000000000000000000"


def received(target: dict[str, Any], payload: dict[str, Any]) -> EmailMessage:
    raw = build("hub@notifyhub.test", ID, target, payload).data
    assert raw.isascii()  # 7-bit clean: no server needs 8BITMIME or SMTPUTF8 for it
    parsed = BytesParser(policy=default).parsebytes(raw)
    assert isinstance(parsed, EmailMessage)
    return parsed


def test_an_ascii_message_reads_back_as_written() -> None:
    target = {"to": ["a@x.test", "b@x.test"], "subject": "Order {{ n }}", "text": "n={{ n }}"}
    message = received(target, {"n": 7})
    assert (message["From"], message["To"]) == ("hub@notifyhub.test", "a@x.test, b@x.test")
    assert (message["Subject"], message["Message-ID"]) == ("Order 7", f"<{ID}@notifyhub>")
    assert not message.is_multipart() and message.get_content() == "n=7"


def test_non_ascii_subject_and_bodies_and_a_long_subject_read_back_intact() -> None:
    subject = "Grüße an {{ name }}, " + "sehr lang " * 12
    target = {
        "to": ["a@x.test"],
        "subject": subject,
        "text": "Hallo {{ name }} ✓",
        "html": "<p>{{ name }} ✓</p>",
    }
    message = received(target, {"name": "Jörg"})
    assert message["Subject"] == ("Grüße an Jörg, " + "sehr lang " * 12).strip()
    plain, html = message.get_body(("plain",)), message.get_body(("html",))
    assert plain is not None and html is not None
    assert plain.get_content() == "Hallo Jörg ✓" and html.get_content() == "<p>Jörg ✓</p>"


def test_a_non_ascii_domain_goes_in_idna_form_and_a_local_part_as_an_encoded_word() -> None:
    target = {"to": ["ops@bücher.test", "jörg@x.test"], "subject": "s", "text": "t"}
    message = received(target, {})
    assert message["To"] == "ops@xn--bcher-kva.test, jörg@x.test"
    mail = build("hub@notifyhub.test", ID, target, {})
    assert mail.recipients == ["ops@xn--bcher-kva.test", "jörg@x.test"]  # the envelope's
    assert build("notifyhub", ID, target, {}).sender == "notifyhub"  # a sender setting as is


def test_every_header_line_is_short_and_crlf_ended_and_the_message_is_dated() -> None:
    """Written by hand (not the stdlib's generator): lines end in CRLF, none is longer
    than 78 characters however many recipients, and `Date` is there (RFC 5322 asks for
    it; some servers add it, others refuse a message without it)."""
    to = [f"someone.with.a.long.name{i}@example.test" for i in range(6)]
    raw = build("hub@notifyhub.test", ID, {"to": to, "subject": "s", "text": "t"}, {}).data
    head = raw.split(b"\r\n\r\n")[0]
    assert b"\n" not in head.replace(b"\r\n", b"")
    assert max(len(line) for line in head.split(b"\r\n")) <= 78
    message = BytesParser(policy=default).parsebytes(raw)
    assert message["To"].addresses and len(message["To"].addresses) == 6
    assert message["Date"].datetime is not None


def test_a_part_that_looks_like_a_boundary_stays_text() -> None:
    """The alternative's boundary starts `=_`, which quoted-printable never writes: a
    body holding the boundary's text cannot end its part."""
    fence = f"--=_notifyhub_{ID}"
    target = {"to": "a@x.test", "subject": "s", "text": fence + "\nafter", "html": fence}
    message = received(target, {})
    text, html = (part.get_content() for part in message.iter_parts())
    assert (text.splitlines(), html) == ([fence, "after"], fence)


def test_a_payload_address_with_a_line_break_is_refused_not_written_as_headers() -> None:
    """compat32 writes header values as given: `to` from a delivery's payload (checked
    nowhere before the send) must not smuggle a `Bcc:` line into the message."""
    target = {"subject": "s", "text": "t"}
    for bad in ("a@x.test\r\nBcc: victim@y.test", "a@x.test\nBcc: v@y.test", "no-at-sign", ""):
        payload = {"to": ["ok@x.test", bad]}
        if not bad:  # an empty entry is skipped, as before
            assert recipients(target, payload) == ["ok@x.test"]
            continue
        with pytest.raises(BadAddress, match="is not an e-mail address"):
            recipients(target, payload)
        with pytest.raises(BadAddress):
            build("hub@notifyhub.test", ID, target, payload)


def test_an_address_a_mail_server_would_read_otherwise_is_refused() -> None:
    """aiosmtplib sends `RCPT TO` with what `email.utils.parseaddr` reads: `a,b@x.test`
    would go to a local mailbox `a` while the history says `a,b@x.test`."""
    target = {"subject": "s", "text": "t"}
    for bad in ("a,b@x.test", "<a>@x.test", "a(b)@x.test", "a;b@x.test", "x@y.test>"):
        with pytest.raises(BadAddress, match="is not an e-mail address"):
            recipients(target, {"to": [bad]})
    assert recipients(target, {"to": ["o'neil+tag@x.test", "jörg@bücher.test"]}) == [
        "o'neil+tag@x.test",
        "jörg@bücher.test",
    ]


def test_the_html_part_escapes_the_payloads_values_and_the_text_part_keeps_them() -> None:
    """A notification's title is a publisher's (or its users') text: in the HTML part
    it must not become a link or markup; `|safe` is how a template inserts HTML."""
    title = '<a href="https://evil.test">Reset your password</a> & more'
    target = {
        "subject": "{{ notification.title }}",
        "text": "{{ notification.title }}",
        "html": "<p>{{ notification.title }}</p>{{ footer|safe }}",
    }
    payload = {"to": "a@x.test", "notification": {"title": title}, "footer": "<hr>"}
    message = received(target, payload)
    text, html = (part.get_content() for part in message.iter_parts())
    assert text.strip() == title
    assert html == (
        "<p>&lt;a href=&#34;https://evil.test&#34;&gt;Reset your password&lt;/a&gt; &amp; more"
        "</p><hr>"
    )
    assert message["Subject"] == title
