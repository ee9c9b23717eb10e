"""Periodic producers over a real PostgreSQL table: one notification per new anomaly."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from notifyhub.db.engine import create_engine
from notifyhub.errors import InvalidInput
from notifyhub.workers.producers import ProducerConfig, load
from support.producers import hub_producer

YAML = """
producers:
  - name: negative-stock-{suffix}
    database_url: "{database_url}"
    interval_s: 60
    query: "SELECT location, qty FROM {table} WHERE qty < 0 ORDER BY location"
    category: restock
    severity: warning
    recipients: {{topics: [restock-{suffix}]}}
    title: "Restock location {{{{ row.location }}}}"
    body: "Stock went to {{{{ row.qty }}}}"
    dedupe_columns: [location]
    dedupe_window_s: 3600
"""


async def test_producer_notifies_once_per_anomalous_row(
    hub: Any, admin_key: str, settings: Any, tmp_path: Path
) -> None:
    suffix = secrets.token_hex(3)
    table = f"stock_{suffix}"
    engine = create_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE TABLE {table} (location text, qty int)"))
        await conn.execute(
            text(f"INSERT INTO {table} VALUES ('A-12', -4), ('B-01', 7), ('C-03', -1)")
        )
    await hub.client.put(
        f"/v1/admin/topics/restock-{suffix}",
        json={"users": ["picker"]},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    path = tmp_path / "producers.yaml"
    path.write_text(YAML.format(suffix=suffix, database_url=settings.database_url, table=table))
    [config] = load(path)
    producer = hub_producer(hub, config)
    try:
        assert await producer.run_once() == 2
        assert await producer.run_once() == 0  # already notified within the window
        async with engine.begin() as conn:
            await conn.execute(text(f"INSERT INTO {table} VALUES ('D-09', -2)"))
        assert await producer.run_once() == 1
    finally:
        await producer.close()
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TABLE {table}"))
        await engine.dispose()
    me = {"Authorization": f"Bearer {hub.tokens.mint_user_token('picker')}"}
    items = (await hub.client.get("/v1/me/notifications", headers=me)).json()["items"]
    assert [i["title"] for i in items] == [
        "Restock location D-09",
        "Restock location C-03",
        "Restock location A-12",
    ]
    assert items[2]["body"] == "Stock went to -4"
    assert items[2]["data"] == {"location": "A-12", "qty": -4}


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("DELETE FROM stock", "ok"),
        ("SELECT 1; DROP TABLE stock", "ok"),
        ("SELECT 1", "{{ broken"),
    ],
)
def test_invalid_producer_files_are_refused(tmp_path: Path, query: str, title: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "producers:\n  - name: p\n    database_url: postgresql://x/y\n"
        f"    query: {query!r}\n    recipients: {{users: [a]}}\n    title: {title!r}\n"
        "    dedupe_columns: [id]\n"
    )
    with pytest.raises(InvalidInput):
        load(path)


async def _stock_table(settings: Any, suffix: str) -> Any:
    engine = create_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.execute(text(f"CREATE TABLE stock_{suffix} (location text, qty int)"))
        await conn.execute(text(f"INSERT INTO stock_{suffix} VALUES ('A-12', -4), ('C-03', -1)"))
    return engine


def _stock_producer(tmp_path: Path, settings: Any, suffix: str) -> ProducerConfig:
    """YAML's producer over table `stock_<suffix>`, as loaded from a file."""
    path = tmp_path / "producers.yaml"
    path.write_text(
        YAML.format(suffix=suffix, database_url=settings.database_url, table=f"stock_{suffix}")
    )
    [config] = load(path)
    return config


async def _drop(engine: Any, suffix: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(f"DROP TABLE stock_{suffix}"))
    await engine.dispose()


async def test_a_failed_publish_does_not_use_up_the_rows_dedupe_window(
    hub: Any, admin_key: str, settings: Any, tmp_path: Path
) -> None:
    """The topic is missing at the first runs (the publish fails, 422-style): once it
    exists, every row is notified, not skipped as already notified for the window."""
    suffix = secrets.token_hex(3)
    engine = await _stock_table(settings, suffix)
    config = _stock_producer(tmp_path, settings, suffix)
    producer = hub_producer(hub, config)
    try:
        for _ in range(2):
            with pytest.raises(InvalidInput, match=f"unknown topic: restock-{suffix}"):
                await producer.run_once()
        await hub.client.put(
            f"/v1/admin/topics/restock-{suffix}",
            json={"users": ["picker"]},
            headers={"Authorization": f"Bearer {admin_key}"},
        )
        assert await producer.run_once() == 2
        assert await producer.run_once() == 0
    finally:
        await producer.close()
        await _drop(engine, suffix)
    me = {"Authorization": f"Bearer {hub.tokens.mint_user_token('picker')}"}
    items = (await hub.client.get("/v1/me/notifications", headers=me)).json()["items"]
    assert sorted(i["title"] for i in items) == [
        "Restock location A-12",
        "Restock location C-03",
    ]


@pytest.mark.parametrize("durable", [False, True], ids=["redis", "durable"])
async def test_a_redis_that_lost_its_data_notifies_rows_again_only_without_durable_claims(
    hub: Any, admin_key: str, settings: Any, tmp_path: Path, redis: Any, durable: bool
) -> None:
    """In durable inbox mode the inboxes come back from PostgreSQL after Redis loses its
    data, and so do the producers' claims: the rows are not notified a second time. In
    Redis-only mode both went (the documented loss window): they are notified again."""
    suffix = secrets.token_hex(3)
    engine = await _stock_table(settings, suffix)
    config = _stock_producer(tmp_path, settings, suffix)
    await hub.client.put(
        f"/v1/admin/topics/restock-{suffix}",
        json={"users": ["picker"]},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    producer = hub_producer(hub, config, durable=durable)
    try:
        assert await producer.run_once() == 2
        lost = [key async for key in redis.scan_iter(f"{settings.redis_prefix}producer:*")]
        assert bool(lost) is not durable  # Redis-only mode keeps its claims there alone
        if lost:
            await redis.delete(*lost)  # what a Redis that lost its data no longer has
        assert await producer.run_once() == (0 if durable else 2)
    finally:
        await producer.close()
        await _drop(engine, suffix)


async def test_a_dedupe_column_the_query_does_not_return_is_an_error(
    hub: Any, admin_key: str, settings: Any, tmp_path: Path
) -> None:
    """`dedupe_columns: [location]` over rows without `location` would key every row
    alike (one notification for all of them): the run fails naming the column."""
    suffix = secrets.token_hex(3)
    engine = await _stock_table(settings, suffix)
    await hub.client.put(
        f"/v1/admin/topics/restock-{suffix}",
        json={"users": ["picker"]},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    path = tmp_path / "producers.yaml"
    yaml_text = YAML.format(
        suffix=suffix, database_url=settings.database_url, table=f"stock_{suffix}"
    )
    path.write_text(yaml_text.replace("SELECT location, qty", "SELECT location AS loc, qty"))
    [config] = load(path)
    producer = hub_producer(hub, config)
    try:
        with pytest.raises(InvalidInput, match="location") as failed:
            await producer.run_once()
        assert "loc, qty" in failed.value.detail
    finally:
        await producer.close()
        await _drop(engine, suffix)
    me = {"Authorization": f"Bearer {hub.tokens.mint_user_token('picker')}"}
    assert (await hub.client.get("/v1/me/notifications", headers=me)).json()["items"] == []


async def test_a_huge_result_is_read_only_up_to_max_rows(hub: Any, tmp_path: Path) -> None:
    """`max_rows` bounds what the hub reads, not only what it keeps: rows past it are
    never computed (a row far past it divides by zero), so a query matching millions of
    rows costs the hub `max_rows` of them."""
    database_url = hub.app_state["settings"].database_url
    path = tmp_path / "producers.yaml"
    path.write_text(
        "producers:\n  - name: huge\n"
        f"    database_url: {database_url!r}\n"
        "    query: 'SELECT g AS id FROM generate_series(1, 100000) AS g"
        " WHERE 1 / (g - 50000) IS NOT NULL'\n"
        "    max_rows: 3\n    recipients: {users: [picker]}\n"
        "    title: 'Row {{ row.id }}'\n    dedupe_columns: [id]\n"
    )
    [config] = load(path)
    producer = hub_producer(hub, config)
    try:
        assert await producer.run_once() == 3
    finally:
        await producer.close()


async def test_a_failing_producer_does_not_make_the_hub_unready(
    settings: Any, start_hub: Any, tmp_path: Path
) -> None:
    """A producer's query is the implementer's SQL on their own database: when it keeps
    failing, the producer's loop backs off and the failures are in the log and the
    metrics, but `/readyz` still answers 200 (every hub process runs the same producers:
    an unready one would take every process out of the load balancer)."""
    path = tmp_path / "producers.yaml"
    path.write_text(
        "producers:\n  - name: broken\n"
        f"    database_url: {settings.database_url!r}\n"
        "    query: 'SELECT nope FROM no_such_table'\n    interval_s: 1\n"
        "    recipients: {users: [picker]}\n    title: 'x'\n    dedupe_columns: [nope]\n"
    )
    broken = settings.model_copy(update={"producers_file": path})
    async with start_hub(broken) as hub:
        runner = hub.app_state["runner"]
        async with asyncio.timeout(10):  # its loop's first pass failed, counted
            while (
                'loop_errors_total{loop="producer:broken"}'
                not in (await hub.client.get("/metrics")).text
            ):
                await asyncio.sleep(0.05)
        # However long ago it last succeeded (never), it is not a loop readiness counts;
        # the hub's own loops are (the same question, asked of every loop).
        overdue = runner.stuck(after_s=-3600)
        assert "producer:broken" not in overdue and "delayed-mover" in overdue
        ready = await hub.client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["stuck_loops"] == []


def test_two_producers_of_one_name_are_refused(tmp_path: Path) -> None:
    """A producer's name keys its lock and its rows' dedupe keys: two of one name would
    share them (one skipping the other's rows) and one loop name."""
    one = (
        "  - name: twice\n    database_url: postgresql://x/y\n    query: 'SELECT 1 AS id'\n"
        "    recipients: {users: [a]}\n    title: t\n    dedupe_columns: [id]\n"
    )
    path = tmp_path / "p.yaml"
    path.write_text("producers:\n" + one + one)
    with pytest.raises(InvalidInput, match="twice"):
        load(path)


@pytest.mark.parametrize("content", [b"\xff\xfeproducers: []\n", None])
def test_an_unreadable_producers_file_is_invalid_input(
    tmp_path: Path, content: bytes | None
) -> None:
    """Not UTF-8, or a directory: a clear error (`notifyhub producers check` prints it;
    `serve` refuses to start with it), not a traceback."""
    path = tmp_path / "p.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(InvalidInput, match=str(path)):
        load(path)
