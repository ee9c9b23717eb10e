"""A stream's quiet flag on the frames it writes (realtime/quiet.py): critical is never quiet."""

from __future__ import annotations

import orjson

from notifyhub.realtime.quiet import mark_quiet


def _event(seq: int, **data: object) -> bytes:
    return b"event: notification\nid: %d-e\ndata: %s\n\n" % (seq, orjson.dumps(data))


def test_every_notification_is_quiet_but_a_critical_one() -> None:
    plain = _event(1, id="a", severity="info")
    critical = _event(2, id="b", severity="critical")
    only_its_data = _event(3, id="c", severity="info", data={"severity": "critical"})
    marked = mark_quiet(plain + critical + only_its_data + b"event: counts\ndata: {}\n\n")
    events = [e for e in marked.split(b"\n\n") if e.startswith(b"event: notification")]
    quiet = [orjson.loads(e.split(b"data: ", 1)[1]).get("quiet") for e in events]
    assert quiet == [True, None, True]
    assert marked.endswith(b"event: counts\ndata: {}\n\n")
