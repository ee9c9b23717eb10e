"""Routing traces: a line's source from the resolution's runs, and the id of an offered
copy's event (what a stream counts as sent)."""

from __future__ import annotations

from notifyhub.domain.notification import Recipients
from notifyhub.realtime.events import offered_id, placed_frames
from notifyhub.store.traces import Route


def test_sources_come_from_the_runs_of_the_resolution() -> None:
    route = Route.of(
        Recipients(users=("a",), groups=("g",), topics=("t",)),
        ((1, "user"), (3, "group:g"), (4, "topic:t")),
    )
    assert route.sources_of(4) == ["user", "group:g", "group:g", "topic:t"]
    assert route.sources_of(2) == ["user", "group:g"]  # lines for the first 2 only
    assert Route.of(Recipients(users=("a", "b"))).sources_of(2) == ["user", "user"]
    assert Route(origin="rule:due").sources_of(2) == ["rule:due", "rule:due"]


def test_an_offered_event_names_its_notification() -> None:
    body = b'{"id":"01JD3Q4M6T9W2Z8K5N7R1C0B3X","title":"t"}'
    frames = placed_frames(body, 7, "e1", 1, 1, 1)
    assert offered_id(frames) == "01JD3Q4M6T9W2Z8K5N7R1C0B3X"
    assert offered_id(b"event: counts\nid: 7\ndata: {}\n\n") is None
