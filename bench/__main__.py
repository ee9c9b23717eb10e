"""`python -m bench`: run a hub process on real Redis + PostgreSQL, load it, write the report.

Uses the Redis/PostgreSQL named by NOTIFYHUB_BENCH_REDIS_URL / NOTIFYHUB_BENCH_DATABASE_URL,
else this machine's defaults (redis://127.0.0.1:6379/0, postgres on 127.0.0.1:5432) with
a fresh key prefix and a fresh database per run; `--embedded` starts the hub's embedded
Valkey and PostgreSQL instead (a bigger machine with neither installed). `--only` runs
the scenarios whose names contain any of the given words and keeps every other row of the
report as it was.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import signal
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import uvloop

from bench import cluster as _cluster  # noqa: F401 (registers its scenario)
from bench import console as _console  # noqa: F401 (registers its scenario)
from bench import deliveries as _deliveries  # noqa: F401 (registers its scenario)
from bench import delivery_targets as _delivery_targets  # noqa: F401 (registers its scenarios)
from bench import digests as _digests  # noqa: F401 (registers its scenario)
from bench import escalations as _escalations  # noqa: F401 (registers its scenario)
from bench import fanin, hubproc, plots, report, scenarios
from bench import pushpin as _pushpin  # noqa: F401 (registers its scenarios)
from bench.hubproc import BenchHub
from bench.report import Measured, Row, Skipped
from bench.streamgen import raise_fd_limit


def _selected(only: list[str] | None) -> list[tuple[str, scenarios.Scenario]]:
    if not only:
        return scenarios.ALL
    # A word naming a scenario exactly picks only it ("5k idle streams" is also part
    # of "19.5k idle streams"); any other word matches as a substring.
    exact = {w.lower() for w in only} & {n.lower() for n, _ in scenarios.ALL}
    partial = [w for w in only if w.lower() not in exact]
    chosen = [
        (n, s)
        for n, s in scenarios.ALL
        if n.lower() in exact or any(w.lower() in n.lower() for w in partial)
    ]
    if not chosen:
        names = "\n  ".join(n for n, _ in scenarios.ALL)
        raise SystemExit(f"no scenario matches {only}; the scenarios are:\n  {names}")
    return chosen


async def measure(
    chosen: list[tuple[str, scenarios.Scenario]],
    repeats: int,
    command: str,
    done: Callable[[str, Row], None],
) -> None:
    """Run each scenario `repeats` times; hand each finished row to `done` at once.

    A scenario that fails is reported and left out (its old row, if any, stays). A run
    stopped (SIGTERM: `timeout`, a machine lent for minutes) keeps the runs its scenario
    finished: the row says how many."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)  # cleans up
    prefix = f"nhbench:{uuid.uuid4().hex[:8]}:"
    commit = report.git_commit()
    async with BenchHub.start(prefix) as hub:
        print(f"hub pid {hub.pid} at {hub.base_url}", flush=True)
        for name, scenario in chosen:

            def finish(runs: list[Measured], name: str = name) -> None:
                date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
                done(name, Row.of(runs, date=date, commit=commit, command=command))

            runs: list[Measured] = []
            try:
                for _ in range(repeats):
                    runs.append(await _once(name, scenario, hub))
            except Skipped as why:
                print(f"{name}: skipped ({why}), its row kept as it was", flush=True)
                continue
            except asyncio.CancelledError:
                if runs:
                    print(f"{name}: stopped after {len(runs)} of {repeats} runs", flush=True)
                    finish(runs)
                raise
            except Exception:
                traceback.print_exc()
                print(f"{name}: FAILED, no row written", flush=True)
                continue
            finish(runs)


async def _once(name: str, scenario: scenarios.Scenario, hub: BenchHub) -> Measured:
    result = await scenario(hub)
    measured = result if isinstance(result, Measured) else Measured(result)
    print(name, measured.metrics, f"(hub pid {hub.pid})", flush=True)
    return measured


@contextlib.contextmanager
def embedded_stores() -> Iterator[None]:
    """Embedded Valkey and PostgreSQL (the `embedded` extra) in a scratch folder, as the
    stores of every hub the run starts; Valkey without its AOF, like a Redis that keeps
    nothing on disk (this machine's)."""
    from redis import Redis

    from notifyhub.embedded import EmbeddedServers

    with tempfile.TemporaryDirectory(prefix="nhbench-stores-") as folder:
        servers = EmbeddedServers.start(Path(folder), database="postgres")
        try:
            with Redis.from_url(servers.redis_url) as redis:
                redis.config_set("appendonly", "no")
            hubproc.use_stores(servers.redis_url, servers.database_url)
            print(f"embedded Valkey at {servers.redis_url}, PostgreSQL in {folder}", flush=True)
            yield
        finally:
            servers.stop()


def write(out: Path, rows: dict[str, Row]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    data = out.with_suffix(".json")
    report.save(data, rows)
    drawn = plots.draw(rows, out.parent)
    order = [name for name, _ in scenarios.ALL]
    text = report.render(rows, order, data_name=data.name, plots=drawn, notes=scenarios.NOTES)
    out.write_text(text)
    print(f"wrote {out}, {data} and {len(drawn)} plots")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="substrings of scenario names")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--list", action="store_true", help="print the scenario names and exit")
    parser.add_argument(
        "--processes",
        type=int,
        default=fanin.PROCESSES,
        help="hub processes of the multi-process rows (bench/fanin.py)",
    )
    parser.add_argument(
        "--streams",
        type=int,
        default=None,
        help="streams of the multi-process rows (10,000 for the broadcast, 2,000 for fan-in)",
    )
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="start embedded Valkey and PostgreSQL for the run instead of this machine's",
    )
    parser.add_argument(
        "--render", action="store_true", help="rewrite the report and plots from the JSON only"
    )
    args = parser.parse_args()
    fanin.configure(args.processes, args.streams)
    if args.list:
        print("\n".join(name for name, _ in scenarios.ALL))
        return
    if args.render:
        write(args.out, report.load(args.out.with_suffix(".json"), args.out))
        return
    chosen = _selected(args.only)
    raise_fd_limit()  # the hub and the generators inherit it
    command = shlex.join(["python", "-m", "bench", *sys.argv[1:]])
    # A full run starts a fresh report; a partial one updates the rows it measures.
    rows = report.load(args.out.with_suffix(".json"), args.out) if args.only else {}

    def done(name: str, row: Row) -> None:
        rows[name] = row
        write(args.out, rows)

    with embedded_stores() if args.embedded else contextlib.nullcontext():
        uvloop.run(measure(chosen, args.repeats, command, done))


if __name__ == "__main__":
    main()
