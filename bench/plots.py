"""PNG plots for the report: RSS per stream against N, and latency CDFs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.report import Row

IDLE_SUFFIX = "idle streams"


def draw(rows: dict[str, Row], folder: Path) -> list[tuple[str, str]]:
    """Draw what the rows allow; returns (caption, file name) of each plot written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:  # the bench extra is not installed: the tables still render
        return []
    drawn = []
    if _rss(rows, folder / "bench-rss-per-stream.png"):
        drawn.append(("RSS per idle stream against N", "bench-rss-per-stream.png"))
    for name, file in (
        ("broadcast to 10k streams", "bench-broadcast-cdf.png"),
        ("steady 500/s to 1k streams", "bench-steady-cdf.png"),
    ):
        if _cdf(rows.get(name), name, folder / file):
            drawn.append((f"{name}: latency CDF (last run)", file))
    return drawn


def _rss(rows: dict[str, Row], path: Path) -> bool:
    import matplotlib.pyplot as plt

    points = sorted(
        (row.summary["streams"][0], row.summary["KiB per stream"], _alive(row))
        for name, row in rows.items()
        if name.endswith(IDLE_SUFFIX) and "KiB per stream" in row.summary
    )
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.errorbar(
        [n for n, _, _ in points],
        [m for _, (m, _h), _ in points],
        yerr=[h for _, (_m, h), _ in points],
        marker="o",
        capsize=3,
    )
    for n, (median, _), alive in points:
        if alive < n:  # the hub dropped streams: the point is not N live streams
            ax.annotate(
                f"only {alive:,.0f} open",
                (n, median),
                textcoords="offset points",
                xytext=(-30, 8),
                fontsize=8,
                color="red",
            )
    ax.axhline(16, color="red", linestyle="--", label="target 16 KiB")
    ax.set(xlabel="idle streams N", ylabel="KiB per stream", title="hub RSS per idle stream")
    ax.set_ylim(bottom=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _alive(row: Row) -> float:
    """Streams open when RSS was read (N where the row predates that metric)."""
    return row.summary.get("alive at RSS read", row.summary["streams"])[0]


def _cdf(row: Row | None, name: str, path: Path) -> bool:
    import matplotlib.pyplot as plt

    if row is None or not row.series.get("latency ms"):
        return False
    values = row.series["latency ms"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(values, [(i + 1) / len(values) for i in range(len(values))])
    ax.set(xlabel="latency ms (send to receipt)", ylabel="fraction of events", title=name)
    ax.set_xscale("log")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
