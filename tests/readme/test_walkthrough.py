"""The README's walk-through, run as written against a fresh embedded hub, so it cannot rot.

The convention (README.md's "API by example" points here):

- Every ```sh / ```bash block of README.md runs, in order, each with `bash -euo pipefail`
  in a directory laid out like a clone after `make run` (`.venv/`, and the hub's data
  directory `.notifyhub/`); the shell variables a block assigns at a line's start
  (`KEY=...`) are carried to the blocks after it. A block right after a line
  `<!-- readme-test: skip (the reason) -->` is not run: keep those few, each with a reason.
- `localhost:8000` is the hub the test started (on a free port).
- Every curl call's HTTP status is checked: a result comment (comment lines right after
  the command, starting with a status or `{`, or a comment at the end of the command's
  last line) names the statuses it may answer, before any `{`; a call without one must
  answer 2xx. The top-level keys of a result comment's JSON must be in the answer.
- `curl -N` (a stream) runs for STREAM_S seconds and must print at least one event.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from notifyhub.embedded import postmaster_pid, valkey_processes, wait_gone
from support.processes import HubProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(shutil.which("curl") is None, reason="the README's examples need curl"),
    pytest.mark.skipif(shutil.which("jq") is None, reason="the README's examples need jq"),
]

README = Path(__file__).resolve().parents[2] / "README.md"
README_HUB = "localhost:8000"
READY_TIMEOUT_S = 120.0
BLOCK_TIMEOUT_S = 90.0
STREAM_S = 2

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- readme-test: skip \((?P<reason>[^)]+)\) -->$")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=", re.MULTILINE)
CURL = re.compile(r"(?<![\w.-])curl\s")
TRAILING_COMMENT = re.compile(r"\s{2,}#\s(?P<comment>.*)$")
STATUS = re.compile(r"\b[1-5]\d\d\b")

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
      -w "%{stderr}readme-test: curl #$n (a stream) ended early: HTTP %{http_code}\n" || true
    cat "$body"
    if ! grep -q '^event: ' "$body"; then
      echo "readme-test: curl #$n (a stream) printed no event in ${RT_STREAM_S}s" >&2
      return 1
    fi
    echo "readme-test: curl #$n: stream, $(grep -c '^event: ' "$body") event(s)" >&2
    return 0
  fi
  code=$(command curl -o "$body" -w '%{http_code}' "$@") || {
    echo "readme-test: curl #$n failed (exit $?)" >&2; return 1; }
  [[ -f $body ]] && cat "$body"
  allowed=$(sed -n "${n}p" "$RT/expect")
  echo "readme-test: curl #$n -> HTTP $code${allowed:+ (README: $allowed)}" >&2
  if [[ -n $allowed && " $allowed " != *" $code "* ]] || [[ -z $allowed && $code != 2?? ]]; then
    echo "readme-test: curl #$n answered $code, the README expects ${allowed:-2xx}" >&2
    return 1
  fi
}
"""


@dataclass(frozen=True)
class Expect:
    """What the README says one curl call answers."""

    line: int  # in the block, from 0
    statuses: tuple[str, ...] = ()  # empty: any 2xx
    keys: tuple[str, ...] = ()  # top-level keys of the JSON it shows
    comment: str = ""


@dataclass(frozen=True)
class Block:
    number: int  # among the README's shell blocks, from 1
    line: int  # of its first command in README.md
    text: str
    skip: str | None

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


def shell_blocks(readme: str) -> list[Block]:
    blocks: list[Block] = []
    lines = readme.splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) in ("sh", "bash"):
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            skip = SKIP.match(before.strip())
            text = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(Block(len(blocks) + 1, i + 2, text, skip and skip["reason"]))
        i = end + 1
    return blocks


def top_level_keys(shown: str) -> tuple[str, ...]:
    """`"key":` at depth 1 of the first `{...}` (README JSON elides with `...` / `…`)."""
    keys: list[str] = []
    depth, i = 0, shown.find("{")
    while 0 <= i < len(shown):
        char = shown[i]
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                break
        elif char == '"':
            end = shown.index('"', i + 1)
            if depth == 1 and shown[end + 1 :].lstrip().startswith(":"):
                keys.append(shown[i + 1 : end])
            i = end
        i += 1
    return tuple(keys)


def _expect(line: int, comment: str) -> Expect:
    head = comment.split("{", 1)[0]
    return Expect(line, tuple(STATUS.findall(head)), top_level_keys(comment), comment)


def expectations(block: str) -> list[Expect]:
    """One per curl call of the block, in order: what its result comment says, if any."""
    calls: list[Expect] = []
    results: list[str] = []  # the comment lines under the latest call
    collecting = False

    def settle() -> None:
        if results and calls:
            calls[-1] = _expect(calls[-1].line, " ".join(results))
        results.clear()

    for number, raw in enumerate(block.splitlines()):
        line = raw.strip()
        if line.startswith("#"):
            text = line.lstrip("#").strip()
            if collecting and (results or STATUS.match(text) or text.startswith("{")):
                results.append(text)
            else:
                collecting = False
            continue
        if not line:
            collecting = False
            continue
        settle()
        code, trailing = line, TRAILING_COMMENT.search(line)
        if trailing is not None:
            code = line[: trailing.start()]
        calls.extend(Expect(number) for _ in CURL.finditer(code))
        if trailing is not None and calls:  # `curl ...   # 204, or 409`: it ends there
            results.append(trailing["comment"])
            settle()
        collecting = bool(calls) and trailing is None
    settle()
    return calls


def test_convention_parsing() -> None:
    """The parser the walk-through relies on, on a block shaped like the README's."""
    block = (
        "KEY=$(cat key)   # the admin key\n"
        "# a service notifies alice\n"
        "curl -s -X POST localhost:8000/v1/x \\\n"
        "  -d '{\"a\": 1}'\n"
        '# 202 {"id": "01J…", "recipients": 1, "data": {"x": 1}}\n'
        "ID=$(curl -s localhost:8000/v1/y | jq -r .id)\n"
        "curl -s -X DELETE localhost:8000/v1/y/$ID   # 204, or 409 once taken\n"
        "# marks it read\n"
        "curl -s localhost:8000/v1/z\n"
        '# {"status": "sent", "attempts": [{"attempt": 1}], ...}\n'
        "# (a note on the answer)\n"
    )
    assert [(e.line, e.statuses, e.keys) for e in expectations(block)] == [
        (2, ("202",), ("id", "recipients", "data")),
        (5, (), ()),
        (6, ("204", "409"), ()),
        (8, (), ("status", "attempts")),
    ]
    readme = (
        "x\n<!-- readme-test: skip (needs Docker) -->\n```sh\ndocker ps\n```\n```python\n1\n```\n"
    )
    assert shell_blocks(readme) == [Block(1, 4, "docker ps\n", "needs Docker")]


def _store_free_env() -> dict[str, str]:
    """As on a fresh machine: no NOTIFYHUB_* (CI's NOTIFYHUB_TEST_* store URLs included)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("NOTIFYHUB_")}


class HubExited(Exception):
    """The hub exited before it was ready; the message is its log."""


class EmbeddedHub(HubProcess):
    """`make run` in a fresh clone: `notifyhub serve` with no store URLs, its data in
    `<clone>/.notifyhub`, run from the clone (on a free port, not 8000)."""

    def __init__(self, clone: Path, log_path: Path) -> None:
        super().__init__({}, log_path)
        self.data_dir = clone / ".notifyhub"
        self.env = _store_free_env() | {"NOTIFYHUB_DATA_DIR": str(self.data_dir)}

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


async def _start_hub(clone: Path, attempts: int = 3) -> EmbeddedHub:
    """The hub, ready; started again on another port when a port it picked free was
    taken before it bound it (by other tests on the machine): "address already in use"."""
    for attempt in range(1, attempts + 1):
        hub = EmbeddedHub(clone, clone / f"hub-{attempt}.log")
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


@dataclass
class Run:
    status: int | None
    stdout: str
    stderr: str


class Walkthrough:
    """Runs blocks one after another in `clone`, carrying their shell variables."""

    def __init__(self, clone: Path, hub: EmbeddedHub, variables: list[str]) -> None:
        self.clone = clone
        self.hub = hub
        self.rt = clone.parent / "readme-test"
        self.rt.mkdir()
        self.state = self.rt / "state.sh"
        self.state.write_text("")
        self.variables = variables

    def script(self, block: Block, expected: list[Expect]) -> Path:
        (self.rt / "calls").write_text("0\n")
        (self.rt / "expect").write_text("".join(" ".join(e.statuses) + "\n" for e in expected))
        for body in self.rt.glob("body-*"):
            body.unlink()
        text = block.text.replace(README_HUB, f"127.0.0.1:{self.hub.port}")
        save = " ".join(self.variables)
        path = self.rt / f"block-{block.number}.sh"
        path.write_text(
            f"{PREAMBLE}\nsource {self.state}\n"
            f"# --- README.md line {block.line} ---\n{text}\n"
            f'for v in {save}; do if [[ -v $v ]]; then declare -p "$v"; fi; done > "$RT/new"\n'
            f'mv "$RT/new" {self.state}\n'
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

    def calls_made(self) -> int:
        return int((self.rt / "calls").read_text())

    def body(self, call: int) -> str:
        path = self.rt / f"body-{call}"
        return path.read_text(errors="replace") if path.exists() else ""

    def report(self, block: Block, expected: list[Expect], why: str, run: Run) -> str:
        """Which example broke, where it is in README.md, and what each call answered."""
        lines = block.text.splitlines()
        made = self.calls_made()
        where = ""
        if 0 < made <= len(expected):
            last = expected[made - 1]
            where = (
                f"\nits curl #{made} is README.md line {block.line + last.line}: "
                f"{lines[last.line].strip()!r}"
            )
        answers = "".join(f"curl #{n}: {self.body(n)[:600]}\n" for n in range(1, made + 1))
        return (
            f"README shell block #{block.number} (README.md line {block.line}: "
            f"{block.first_line!r}): {why}{where}\n"
            f"--- answers ---\n{answers}--- stdout ---\n{run.stdout}\n"
            f"--- stderr ---\n{run.stderr}"
        )


def _missing_keys(expect: Expect, body: str) -> list[str] | str:
    """Keys the README shows that the answer lacks."""
    try:
        answer = json.loads(body)
    except ValueError:
        return "not JSON"
    if not isinstance(answer, dict):
        return "not a JSON object"
    return [key for key in expect.keys if key not in answer]


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A directory laid out like a clone after `make venv`: `.venv` is this venv."""
    directory = tmp_path / "clone"
    directory.mkdir()
    (directory / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return directory


async def test_every_readme_shell_block_runs_against_an_embedded_hub(clone: Path) -> None:
    blocks = shell_blocks(README.read_text())
    runnable = [b for b in blocks if b.skip is None]
    assert len(runnable) >= 5, "README.md: the API examples are gone, or not ```sh blocks"
    assert len(blocks) - len(runnable) <= 3, "keep README skips few"
    variables = sorted({v for b in runnable for v in ASSIGNMENT.findall(b.text)})

    hub = await _start_hub(clone)
    try:
        walk = Walkthrough(clone, hub, variables)
        for block in runnable:
            expected = expectations(block.text)
            run = await walk.run(block, expected)
            if run.status != 0:
                why = "timed out" if run.status is None else f"exited {run.status}"
                pytest.fail(walk.report(block, expected, why, run), pytrace=False)
            made = walk.calls_made()
            if made != len(expected):
                why = f"ran {made} curl calls, the test parsed {len(expected)} (a loop?)"
                pytest.fail(walk.report(block, expected, why, run), pytrace=False)
            for call, expect in enumerate(expected, 1):
                missing = _missing_keys(expect, walk.body(call)) if expect.keys else []
                if missing:
                    why = (
                        f"curl #{call} answered {walk.body(call)[:300]!r}, the README shows "
                        f"{expect.comment!r}: {missing}"
                    )
                    pytest.fail(walk.report(block, expected, why, run), pytrace=False)
        # The walk-through read the admin key from the file; it is the one printed, too.
        key = (hub.data_dir / "dev-credentials.txt").read_text().strip()
        printout = " ".join(hub.output().split())
        assert f"admin API key : {key}" in printout
        assert "user token : eyJ" in printout
    finally:
        await hub.stop()
