"""Every page's examples (README.md, then docs/ in mkdocs.yml's order), run as written
against one fresh embedded hub, and checked by value, so a page cannot drift from the hub.

The convention (docs/examples.md says it for writers; tests/readme/doccheck.py parses it):

- Every ```bash / ```sh block of a page runs, in order, each with `bash -euo pipefail` in a
  directory laid out like a clone after `make run` (`.venv/`, and the hub's data directory
  `.notifyhub/`). Each page starts with no shell variables (a page sets its own `KEY`,
  `TOKEN`); the variables a block assigns at a line's start are carried to the page's later
  blocks. A block right after `<!-- doc-test: skip (the reason) -->` is not run: keep
  those few, each with a reason.
- `localhost:8000` is the hub the test started (on a free port).
- Every curl call's HTTP status is checked: a result comment (comment lines right after the
  command, starting with a status, or a comment at the end of its last line) names the
  statuses it may answer; a call without one must answer 2xx. A comment never shows a
  value (nothing would check it).
- A ```json (or ```text) block right after a shell block is what the block prints, and is
  compared with it: exactly, except that a string `"…"` is any value, `…` inside a string
  any characters, a bare `…` in an object or a list "more members / items", and `$NAME`
  in a string the value of a variable the page set (ids captured and reused).
- `curl -N` (a stream) runs for STREAM_S seconds and must print at least one event.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from notifyhub.embedded import postmaster_pid, valkey_processes, wait_gone
from readme.doccheck import (
    ASSIGNMENT,
    Block,
    Expect,
    expectations,
    output_differences,
    shell_blocks,
    shown_values,
)
from support.cluster import free_port
from support.processes import HubProcess

ROOT = Path(__file__).resolve().parents[2]
PAGE_HUB = "localhost:8000"
READY_TIMEOUT_S = 120.0
BLOCK_TIMEOUT_S = 90.0
STREAM_S = 2
MAX_SKIPS = 8  # across every page: examples that cannot run here (Docker, a browser)


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav names, in order."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for item in node.values():
                walk(item)

    walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    return [name for name in found if name.endswith(".md")]


def pages() -> list[Path]:
    """README.md, then every page of the site's nav, in nav order."""
    docs = [ROOT / "docs" / name for name in nav_pages()]
    every = [ROOT / "README.md", *docs]
    chosen = os.environ.get("NOTIFYHUB_DOC_PAGES")  # e.g. "docs/routing.md", while writing
    if chosen:
        return [ROOT / name for name in chosen.split(",")]
    return every


# Defines `curl` for the blocks: each call's status is checked as it returns (so a block
# stops at the first wrong answer) against line <n> of $RT/expect, its body is kept in
# $RT/body-<n>; the call counter is a file because `$(curl ...)` runs in a subshell.
PREAMBLE = r"""
curl() {
  local n body code allowed
  n=$(( $(<"$RT/calls") + 1 )); echo "$n" > "$RT/calls"
  body="$RT/body-$n"
  if [[ " $* " == *" -N "* || " $* " == *" --no-buffer "* ]]; then
    timeout "$RT_STREAM_S" curl -sS "$@" > "$body" \
      -w "%{stderr}doc-test: curl #$n (a stream) ended early: HTTP %{http_code}\n" || true
    cat "$body"
    if ! grep -q '^event: ' "$body"; then
      echo "doc-test: curl #$n (a stream) printed no event in ${RT_STREAM_S}s" >&2
      return 1
    fi
    echo "doc-test: curl #$n: stream, $(grep -c '^event: ' "$body") event(s)" >&2
    return 0
  fi
  code=$(command curl -o "$body" -w '%{http_code}' "$@") || {
    echo "doc-test: curl #$n failed (exit $?)" >&2; return 1; }
  [[ -f $body ]] && cat "$body"
  allowed=$(sed -n "${n}p" "$RT/expect")
  echo "doc-test: curl #$n -> HTTP $code${allowed:+ (page: $allowed)}" >&2
  if [[ -n $allowed && " $allowed " != *" $code "* ]] || [[ -z $allowed && $code != 2?? ]]; then
    echo "doc-test: curl #$n answered $code, the page expects ${allowed:-2xx}" >&2
    return 1
  fi
}
"""


def _store_free_env() -> dict[str, str]:
    """As on a fresh machine: no NOTIFYHUB_* (CI's NOTIFYHUB_TEST_* store URLs included)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("NOTIFYHUB_")}


class HubExited(Exception):
    """The hub exited before it was ready; the message is its log."""


class EmbeddedHub(HubProcess):
    """`make run` in a fresh clone: `notifyhub serve` with no store URLs, its data in
    `<clone>/.notifyhub`, run from the clone (on a free port, not 8000)."""

    def __init__(self, clone: Path, log_path: Path, env: dict[str, str]) -> None:
        super().__init__({}, log_path)
        self.data_dir = clone / ".notifyhub"
        self.env = _store_free_env() | {"NOTIFYHUB_DATA_DIR": str(self.data_dir)} | env

    async def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until /readyz is 200, failing at once (with the log) if the hub exits."""
        assert self.proc is not None
        ready = asyncio.ensure_future(super().wait_ready(timeout_s))
        exited = asyncio.ensure_future(self.proc.wait())
        await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        if not ready.done():
            ready.cancel()
            raise HubExited(f"exit status {self.proc.returncode}:\n{self.output()}")
        ready.result()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def stop(self) -> None:
        await super().stop()
        # A hub that had to be killed may leave its stores: never leave them running.
        strays = valkey_processes(self.data_dir / "valkey")
        pid = postmaster_pid(self.data_dir / "pg")
        if pid is not None:
            import psutil

            strays.append(psutil.Process(pid))
        for proc in strays:
            proc.terminate()
        wait_gone(strays, timeout_s=10)


async def _start_hub(clone: Path, env: dict[str, str], attempts: int = 3) -> EmbeddedHub:
    """The hub, ready; started again on another port when a port it picked free was
    taken before it bound it (by other tests on the machine): "address already in use"."""
    for attempt in range(1, attempts + 1):
        hub = EmbeddedHub(clone, clone / f"hub-{attempt}.log", env)
        try:
            await hub.start()
        except HubExited as exc:
            await hub.stop()
            if "address already in use" in str(exc) and attempt < attempts:
                continue
            pytest.fail(f"the hub exited before it was ready, {exc}", pytrace=False)
        except BaseException:
            await hub.stop()
            raise
        return hub
    raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def smtp_catcher(log_path: Path) -> AsyncIterator[dict[str, str]]:
    """README's e-mail catcher (`python -m aiosmtpd -n -l 127.0.0.1:PORT`, printing each
    e-mail to `log_path`) on a free port; yields the settings that point a hub at it."""
    port = free_port()
    with log_path.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}",
            stdout=log, stderr=log, env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)  # a process starting up: nothing to run_once
                    continue
                writer.close()
                break
        yield {
            "NOTIFYHUB_DELIVERIES__SMTP_HOST": "127.0.0.1",
            "NOTIFYHUB_DELIVERIES__SMTP_PORT": str(port),
        }
    finally:
        proc.terminate()
        await proc.wait()


@dataclass
class Run:
    status: int | None
    stdout: str
    stderr: str


class Walkthrough:
    """Runs one page's blocks one after another in `clone`, carrying their shell variables."""

    def __init__(self, clone: Path, hub: EmbeddedHub, page: Path, variables: list[str]) -> None:
        self.clone = clone
        self.hub = hub
        self.page = page.relative_to(ROOT)
        self.rt = clone.parent / f"doc-test-{page.stem}"
        self.rt.mkdir()
        self.state = self.rt / "state.sh"
        self.state.write_text("")
        self.variables = variables

    def script(self, block: Block, expected: list[Expect]) -> Path:
        (self.rt / "calls").write_text("0\n")
        (self.rt / "expect").write_text("".join(" ".join(e.statuses) + "\n" for e in expected))
        for body in self.rt.glob("body-*"):
            body.unlink()
        text = block.text.replace(PAGE_HUB, f"127.0.0.1:{self.hub.port}")
        save = " ".join(self.variables)
        path = self.rt / f"block-{block.number}.sh"
        path.write_text(
            f"{PREAMBLE}\nsource {self.state}\n"
            f"# --- {self.page} line {block.line} ---\n{text}\n"
            f'for v in {save}; do if [[ -v $v ]]; then declare -p "$v"; fi; done > "$RT/new"\n'
            f'mv "$RT/new" {self.state}\n'
            f'for v in {save}; do if [[ -v $v ]]; then printf "%s=%s\\0" "$v" "${{!v}}"; fi; '
            f'done > "$RT/values"\n'
        )
        return path

    async def run(self, block: Block, expected: list[Expect]) -> Run:
        script = self.script(block, expected)
        env = _store_free_env() | {"RT": str(self.rt), "RT_STREAM_S": str(STREAM_S)}
        proc = await asyncio.create_subprocess_exec(
            "bash", "-euo", "pipefail", str(script), cwd=self.clone, env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), BLOCK_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            stdout, stderr = await proc.communicate()
            return Run(None, stdout.decode(errors="replace"), stderr.decode(errors="replace"))
        return Run(
            proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")
        )

    def values(self) -> dict[str, str]:
        """The page's shell variables after the latest block."""
        path = self.rt / "values"
        if not path.exists():
            return {}
        pairs = [item.split("=", 1) for item in path.read_text().split("\0") if item]
        return {name: value for name, value in pairs}

    def calls_made(self) -> int:
        return int((self.rt / "calls").read_text())

    def body(self, call: int) -> str:
        path = self.rt / f"body-{call}"
        return path.read_text(errors="replace") if path.exists() else ""

    def report(self, block: Block, expected: list[Expect], why: str, run: Run) -> str:
        """Which example broke, where it is in its page, and what each call answered."""
        lines = block.text.splitlines()
        made = self.calls_made()
        where = ""
        if 0 < made <= len(expected):
            last = expected[made - 1]
            where = (
                f"\nits curl #{made} is {self.page} line {block.line + last.line}: "
                f"{lines[last.line].strip()!r}"
            )
        answers = "".join(f"curl #{n}: {self.body(n)[:600]}\n" for n in range(1, made + 1))
        return (
            f"{self.page} shell block #{block.number} (line {block.line}: "
            f"{block.first_line!r}): {why}{where}\n"
            f"--- answers ---\n{answers}--- stdout ---\n{run.stdout}\n"
            f"--- stderr ---\n{run.stderr}"
        )

    async def check(self, block: Block) -> None:
        """Run one block; fail on a wrong status, a missed call or output that drifted."""
        expected = expectations(block.text)
        run = await self.run(block, expected)
        if run.status != 0:
            why = "timed out" if run.status is None else f"exited {run.status}"
            pytest.fail(self.report(block, expected, why, run), pytrace=False)
        made = self.calls_made()
        if made != len(expected):
            why = f"ran {made} curl calls, the test parsed {len(expected)} (a loop?)"
            pytest.fail(self.report(block, expected, why, run), pytrace=False)
        if block.output is not None:
            found = output_differences(block.output, run.stdout, self.values())
            if found:
                why = (
                    f"its output differs from the block at {self.page} line "
                    f"{block.output.line}:\n  " + "\n  ".join(found)
                )
                pytest.fail(self.report(block, expected, why, run), pytrace=False)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A directory laid out like a clone after `make venv`: `.venv` is this venv."""
    directory = tmp_path / "clone"
    directory.mkdir()
    (directory / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return directory


def test_every_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml's nav would have its examples left unchecked."""
    listed = set(nav_pages())
    on_disk = {path.name for path in (ROOT / "docs").glob("*.md")}
    assert on_disk <= listed


def test_every_page_follows_the_convention() -> None:
    """Before any hub starts: no value in a comment, every ```json output parses."""
    for page in pages():
        for block in shell_blocks(page.read_text()):
            where = f"{page.relative_to(ROOT)} line {block.line}"
            expectations(block.text)  # raises ConventionError
            if block.output is not None and block.output.kind == "json":
                assert shown_values(block.output.text), f"{where}: an empty output block"


@pytest.mark.slow  # it starts a hub and its stores
@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
@pytest.mark.skipif(shutil.which("jq") is None, reason="needs jq")
async def test_every_page_runs_against_an_embedded_hub(clone: Path) -> None:
    blocks = {page: shell_blocks(page.read_text()) for page in pages()}
    readme = blocks[ROOT / "README.md"]
    assert len([b for b in readme if b.skip is None]) >= 3, "README.md: the tour is gone"
    skipped = sum(1 for page in blocks.values() for b in page if b.skip is not None)
    assert skipped <= MAX_SKIPS, "keep skipped examples few"

    async with smtp_catcher(clone / "smtp.log") as smtp:
        await _walk_every_page(clone, blocks, smtp)
    # README's e-mail example reached the catcher, not only the trace.
    caught = (clone / "smtp.log").read_text(errors="replace")
    assert "alice@example.com" in caught and "Dock 4 blocked" in caught, caught[-2000:]


async def _walk_every_page(
    clone: Path, blocks: dict[Path, list[Block]], env: dict[str, str]
) -> None:
    """Every page's runnable blocks in order against one hub started with `env`."""
    hub = await _start_hub(clone, env)
    try:
        for page, page_blocks in blocks.items():
            runnable = [b for b in page_blocks if b.skip is None]
            variables = sorted({v for b in runnable for v in ASSIGNMENT.findall(b.text)})
            walk = Walkthrough(clone, hub, page, variables)
            for block in runnable:
                await walk.check(block)
        # The tour read the admin key from the file; it is the one printed, too.
        key = (hub.data_dir / "dev-credentials.txt").read_text().strip()
        printout = " ".join(hub.output().split())
        assert f"admin API key : {key}" in printout
        assert "user token : eyJ" in printout
    finally:
        await hub.stop()
