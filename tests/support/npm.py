"""clients/react's npm toolchain for the tests: `npm ci` once per package-lock.json, and the
React sample bundled with esbuild once per source change, both cached in gitignored folders
(node_modules/ and .build/). Without npm the tests skip and say why; an npm that cannot
reach its registry skips too, unless NOTIFYHUB_REQUIRE_NPM=1 (CI) makes that a failure."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

REACT_DIR = Path(__file__).resolve().parents[2] / "clients" / "react"
BUILD_DIR = REACT_DIR / ".build"
NODE_MODULES = REACT_DIR / "node_modules"
STAMP = NODE_MODULES / ".notifyhub-npm-ci"
OFFLINE_SIGNS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network")
NPM_CI_TIMEOUT_S = 600


def _required() -> bool:
    return os.environ.get("NOTIFYHUB_REQUIRE_NPM") == "1"


def _skip_or_fail(reason: str) -> NoReturn:
    if _required():
        pytest.fail(f"{reason} (NOTIFYHUB_REQUIRE_NPM=1)")
    pytest.skip(reason)


def _digest(paths: list[Path]) -> str:
    sha = hashlib.sha256()
    for path in sorted(paths):
        sha.update(str(path.relative_to(REACT_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()[:16]


@contextmanager
def _locked() -> Iterator[None]:
    """One `npm ci` at a time, across pytest processes sharing this checkout."""
    BUILD_DIR.mkdir(exist_ok=True)
    with (BUILD_DIR / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=REACT_DIR, capture_output=True, text=True, timeout=timeout_s, check=False
    )


def node_modules() -> float:
    """Install clients/react's pinned dev dependencies (`npm ci`) unless this lock file is
    already installed; returns the seconds `npm ci` took (0 when cached)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        _skip_or_fail("TypeScript and React tests need Node.js and npm (apt-get install npm)")
    wanted = _digest([REACT_DIR / "package.json", REACT_DIR / "package-lock.json"])
    with _locked():
        if STAMP.is_file() and STAMP.read_text() == wanted:
            return 0.0
        started = time.monotonic()
        # --ignore-scripts: no install scripts run (esbuild's only checks its binary).
        done = _run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], timeout_s=NPM_CI_TIMEOUT_S
        )
        took = time.monotonic() - started
        if done.returncode != 0:
            output = done.stdout + done.stderr
            if any(sign in output for sign in OFFLINE_SIGNS):
                _skip_or_fail(f"npm ci could not reach the registry: {output.strip()[-300:]}")
            pytest.fail(f"npm ci failed in {REACT_DIR}:\n{output}")
        STAMP.write_text(wanted)
        return took


def bin_path(name: str) -> str:
    return str(NODE_MODULES / ".bin" / name)


def run_bin(name: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """A tool from clients/react's node_modules/.bin, run in clients/react."""
    return _run([bin_path(name), *args], timeout_s)


def sample_bundle() -> Path:
    """The React sample (sample/app.tsx and the library) bundled by esbuild into one file
    next to sample/index.html; rebuilt only when a source or the lock file changed."""
    sources = [*(REACT_DIR / "src").rglob("*"), *(REACT_DIR / "sample").rglob("*")]
    files = [p for p in sources if p.is_file()]
    files.append(REACT_DIR / "package-lock.json")
    out = BUILD_DIR / f"sample-{_digest(files)}"
    with _locked():
        if (out / "app.js").is_file():
            return out
        staging = BUILD_DIR / f"{out.name}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        done = run_bin(
            "esbuild",
            "sample/app.tsx",
            "--bundle",
            "--format=iife",
            "--target=es2022",
            # React's development build: its warnings reach the console, which the test reads.
            '--define:process.env.NODE_ENV="development"',
            "--log-level=warning",
            f"--outfile={staging / 'app.js'}",
        )
        if done.returncode != 0:
            pytest.fail(f"esbuild failed:\n{done.stdout}{done.stderr}")
        shutil.copy(REACT_DIR / "sample" / "index.html", staging / "index.html")
        staging.rename(out)
        for old in BUILD_DIR.glob("sample-*"):
            if old != out:
                shutil.rmtree(old, ignore_errors=True)
    return out
