"""Change types and inbox operations are closed sets: every member has its row, each
entry type becomes the same SSE event as before, and anything unknown is an error."""

from __future__ import annotations

from importlib.resources import files
from typing import cast

import orjson
import pytest

from notifyhub.domain.notification import from_ms, to_rfc3339
from notifyhub.realtime.events import frame
from notifyhub.realtime.sse import change_frame
from notifyhub.services.durable import apply_change
from notifyhub.store.changes import (
    CHANGE_TYPES,
    Change,
    ChangeLogError,
    ChangeType,
    DeleteChange,
    NotificationChange,
    UnknownChangeType,
    UpdateChange,
    decode_entry,
)
from notifyhub.store.codecs import Deferred, Placed, PushedOut
from notifyhub.store.inbox import InboxStore
from notifyhub.store.operations import (
    OPERATIONS,
    ActOp,
    LoggedOpError,
    MarkAllOp,
    MarkOp,
    Operation,
    RecallOp,
    RemoveOp,
    ResurfaceOp,
    UnknownOperation,
    decode_logged,
)

COUNTS = {"unread": 1, "unseen": 2, "total": 3}


def entry(**fields: object) -> bytes:
    return orjson.dumps({"counts": COUNTS, **fields})


def test_every_change_type_has_its_row_and_class() -> None:
    assert set(CHANGE_TYPES) == set(ChangeType)
    for kind, decode in CHANGE_TYPES.items():
        assert decode.__self__.type is kind  # type: ignore[attr-defined]


def test_every_operation_has_its_row_and_script() -> None:
    assert set(OPERATIONS) == set(Operation)
    lua = files("notifyhub.store") / "lua"
    for op, spec in OPERATIONS.items():
        assert (lua / f"{spec.script}.lua").is_file(), op
        assert set(spec.appends) <= set(ChangeType)
        if spec.logged is not None:
            assert spec.logged.kind is op


def test_update_and_delete_frames() -> None:
    """An update entry logged before archive and pin existed reads as neither."""
    read_at = 1_700_000_000_123
    update = decode_entry(entry(type="update", seq=7, id="n1", read_at=read_at, seen=True))
    assert isinstance(update, UpdateChange)
    data = {
        "id": "n1",
        "status": "read",
        "seen": True,
        "read_at": to_rfc3339(from_ms(read_at)),
        "archived": False,
        "pinned": False,
        "snoozed_until": None,
    }
    assert change_frame(Change(update, None, None), "ab12") == frame("update", 7, "ab12", data)
    unread = decode_entry(
        entry(
            type="update",
            seq=8,
            id="n1",
            read_at=0,
            seen=False,
            archived=True,
            pinned=True,
            snoozed=read_at,
        )
    )
    data = {
        "id": "n1",
        "status": "unread",
        "seen": False,
        "read_at": None,
        "archived": True,
        "pinned": True,
        "snoozed_until": to_rfc3339(from_ms(read_at)),
    }
    assert change_frame(Change(unread, None, None), "") == frame("update", 8, "", data)
    done = decode_entry(
        entry(
            type="update",
            seq=10,
            id="n1",
            read_at=read_at,
            seen=True,
            action="ok",
            completed=f"1@{read_at}",
        )
    )
    fields = orjson.loads(change_frame(Change(done, None, None), "").split(b"data: ")[1])
    assert fields["completed"] == {"action": "ok", "completed_at": to_rfc3339(from_ms(read_at))}
    assert "completed" not in orjson.loads(
        change_frame(Change(unread, None, None), "").split(b"data: ")[1]
    )  # other updates leave it as it was
    delete = decode_entry(entry(type="delete", seq=9, id="n2"))
    assert isinstance(delete, DeleteChange) and delete.counts.total == 3
    assert (
        change_frame(Change(delete, None, None), "")
        == b'event: delete\nid: 9\ndata: {"id":"n2"}\n\n'
    )


def test_a_thread_join_frames_the_whole_item() -> None:
    """A join's entry carries no state (the event is the thread item as it now is); it
    sends nothing when the thread was deleted since."""
    join = decode_entry(entry(type="update", seq=11, id="t1", thread=1))
    assert isinstance(join, UpdateChange) and join.thread and join.counts.unread == 1
    content, state = b'{"id":"t1","title":"t"}', b"0|0||"
    sent = change_frame(Change(join, content, state), "")
    assert sent is not None and sent.startswith(b"event: update\nid: 11\n")
    item = orjson.loads(sent.split(b"data: ")[1])
    assert item["id"] == "t1" and item["title"] == "t" and item["status"] == "unread"
    assert change_frame(Change(join, None, None), "") is None


def test_notification_frames() -> None:
    content, state = b'{"id":"n3","title":"t"}', b"0|0||"
    note = decode_entry(entry(type="notification", seq=3, id="n3", replaces="n0"))
    assert isinstance(note, NotificationChange) and note.replaces == "n0" and not note.quiet
    body = (
        b'{"id":"n3","title":"t","thread":null,"tags":[],"body_format":"text","thread_key":null,'
        b'"thread_window_s":null,"status":"unread","seen":false,"read_at":null,'
        b'"archived":false,"pinned":false,"snoozed_until":null,"actions":[],"completed":null,'
        b'"replaces":"n0"}'
    )
    assert change_frame(Change(note, content, state), "e") == (
        b"event: notification\nid: 3-e\ndata: " + body + b"\n\n"
    )
    pinned = b"0|0|c|k\x1faps1700000000123"  # flags after the collapse key (lua/common.lua)
    fields = orjson.loads(change_frame(Change(note, content, pinned), "e").split(b"data: ")[1])
    assert (fields["archived"], fields["pinned"]) == (True, True)
    assert fields["snoozed_until"] == to_rfc3339(from_ms(1_700_000_000_123))
    back = decode_entry(entry(type="notification", seq=5, id="n3", resurfaced=1))
    fields = orjson.loads(change_frame(Change(back, content, state), "e").split(b"data: ")[1])
    assert fields["resurfaced"] is True
    buttons = b'{"id":"n3","title":"t","actions":[{"id":"yes"},{"id":"no"}]}'
    done = b"0|0||\x1fc2@1700000000123"
    fields = orjson.loads(change_frame(Change(note, buttons, done), "e").split(b"data: ")[1])
    assert fields["completed"] == {"action": "no", "completed_at": "2023-11-14T22:13:20.123Z"}
    # deleted (or replaced again) since: the copy it replaced still leaves the client
    assert change_frame(Change(note, None, None), "e") == (
        b'event: delete\nid: 3-e\ndata: {"id":"n0"}\n\n'
    )
    plain = decode_entry(entry(type="notification", seq=6, id="n6"))
    assert change_frame(Change(plain, None, None), "e") is None  # deleted since: nothing
    quiet = decode_entry(entry(type="notification", seq=4, id="n4", quiet=1))
    assert change_frame(Change(quiet, content, state), "e") is None  # counts only


def test_an_unknown_change_type_is_an_error_never_a_delete() -> None:
    with pytest.raises(UnknownChangeType, match="archive"):
        decode_entry(entry(type="archive", seq=1, id="n1"))
    with pytest.raises(UnknownChangeType):
        decode_entry(entry(seq=1, id="n1"))  # no type at all
    with pytest.raises(ChangeLogError):
        decode_entry(entry(type="update", seq=1, id="n1"))  # read_at, seen missing


def test_logged_operations_keep_their_json() -> None:
    """The JSON logged before operations were typed still replays."""
    logged = [
        ({"kind": "mark", "ids": ["a"], "read": None, "seen": True}, MarkOp),
        ({"kind": "remove", "ids": ["a", "b"]}, RemoveOp),
        ({"kind": "mark_all", "category": None, "before_id": "01J0"}, MarkAllOp),
        ({"kind": "recall", "id": "n1"}, RecallOp),
        ({"kind": "mark", "ids": ["a"], "read": None, "seen": False, "archived": True}, MarkOp),
        ({"kind": "mark", "ids": ["a"], "read": True, "seen": False, "pinned": False}, MarkOp),
        (
            {"kind": "mark_all", "category": "c", "before_id": "01J0", "action": "archive"},
            MarkAllOp,
        ),
        ({"kind": "mark", "ids": ["a"], "read": None, "seen": False, "snooze_until_ms": 0}, MarkOp),
        ({"kind": "resurface", "id": "n1", "until_ms": 1_700_000_000_123}, ResurfaceOp),
        ({"kind": "act", "id": "n1", "index": 2, "action": "no", "at_ms": 1}, ActOp),
        (
            {"kind": "mark_all", "category": None, "before_id": "01J0", "view_line": "o\t\t0\to\t"},
            MarkAllOp,
        ),
    ]
    for raw, cls in logged:
        op = decode_logged(raw)
        assert type(op) is cls
        assert op.to_json() == raw


async def test_an_unknown_logged_operation_is_an_error_never_skipped() -> None:
    store = cast("InboxStore", None)  # never reached
    with pytest.raises(UnknownOperation, match="archive"):
        await apply_change(store, "t", "u", {"kind": "archive", "ids": ["a"]})
    with pytest.raises(UnknownOperation):
        await apply_change(store, "t", "u", {"kind": "purge"})  # not a logged operation
    with pytest.raises(LoggedOpError):
        await apply_change(store, "t", "u", {"kind": "mark", "ids": ["a"], "colour": 1})


def test_replies_of_several_slots_merge_in_user_order() -> None:
    """A Cluster fan-out: one reply per slot (first-seen order), users interleaved."""
    slots = [7, 3, 7]
    # users 0 and 2; the second (slot position 2) replaced "r" and evicted "a" and "b"
    seven = [1, 0, 1, 1, 1, b"e", 0, 5, 2, 1, 1, 1, b"e", 1, b"2 r a b", 1, 2]
    three = [0, 0, 0, 0, 0, b"", 0, 0, 0]
    merged = Placed.from_slot_replies(slots, [seven, three])
    assert merged.firsts == [1, 0, 5]
    assert merged.evicted == 2
    assert list(merged.copies())[2] == (5, 2, 1, 1, 1, b"e", 1)
    assert merged.pushed_out == {2: PushedOut("r", ("a", "b"))}
    pending = Deferred.from_slot_replies([1, 2], [[4, 0], [-1, 0]])
    assert (pending.firsts, pending.evicted) == ([4, -1], 0)


def test_what_a_copy_pushed_out_is_read_from_the_reply() -> None:
    """place.lua: a line per copy that replaced or evicted, their count, the evictions."""
    one = [3, 0, 1, 1, 1, b"e", 0]
    reply = Placed.from_reply([*one, *one, b"2 old", b"1  x y", 2, 2])
    assert reply.pushed_out == {1: PushedOut("old", ()), 0: PushedOut(None, ("x", "y"))}
    assert (reply.firsts, reply.evicted) == ([3, 3], 2)
