"""A publish's recipients as one tenant and its users' ids (store/inbox/base.py)."""

from __future__ import annotations

from notifyhub.store.inbox.base import TenantUsers, user_members

IDS = ["ann", "bob", "cy/1", "dee"]


def test_behaves_as_its_pairs() -> None:
    users = TenantUsers("acme", list(IDS))
    pairs = [("acme", user) for user in IDS]
    assert len(users) == 4
    assert list(users) == pairs
    assert [users[i] for i in range(4)] == pairs
    assert users[-1] == ("acme", "dee")
    assert ("acme", "bob") in users
    assert ("other", "bob") not in users
    assert users.index(("acme", "cy/1")) == 2


def test_a_slice_is_one_tenant_again() -> None:
    users = TenantUsers("acme", list(IDS))
    part = users[1:3]
    assert isinstance(part, TenantUsers)
    assert part.tenant == "acme"
    assert list(part) == [("acme", "bob"), ("acme", "cy/1")]
    assert list(users[10:]) == []


def test_members_are_those_of_the_pairs() -> None:
    users = TenantUsers("acme", list(IDS))
    assert user_members(users) == user_members(list(users))
    assert user_members(users) == ["acme/ann", "acme/bob", "acme/cy/1", "acme/dee"]


def test_keeps_the_ids_it_was_given() -> None:
    """One list of strings (which the cyclic collector does not scan), not a pair per user."""
    ids = [f"user-{i}" for i in range(10_000)]
    users = TenantUsers("acme", ids)
    assert users.ids is ids
    assert users[5_000:].ids == ids[5_000:]
