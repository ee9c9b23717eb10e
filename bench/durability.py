"""`python -m bench.durability`: single-recipient ingest, Redis-only vs durable inbox mode.

Each mode gets its own hub process (fresh database and key prefix); the modes alternate
`--rounds` times so a noisy neighbour does not favour one of them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid

from bench import scenarios
from bench.hubproc import BenchHub

MODES = ("redis", "postgres")


async def _measure(mode: str, total: int) -> dict[str, float]:
    os.environ["NOTIFYHUB_INBOX_DURABILITY"] = mode  # the hub process inherits it
    try:
        async with BenchHub.start(f"nhbench:{uuid.uuid4().hex[:8]}:") as hub:
            await scenarios.ingest(hub, total=200)  # warm up
            return await scenarios.ingest(hub, total=total)
    finally:
        del os.environ["NOTIFYHUB_INBOX_DURABILITY"]


async def main(rounds: int, total: int) -> None:
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(rounds):
        for mode in MODES:
            result = await _measure(mode, total)
            rates[mode].append(result["requests/s"])
            print(mode, {k: round(v, 1) for k, v in result.items()}, flush=True)
    best = {mode: max(values) for mode, values in rates.items()}
    print(f"best requests/s: {best}; durable/redis = {best['postgres'] / best['redis']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--total", type=int, default=3000)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.total))
