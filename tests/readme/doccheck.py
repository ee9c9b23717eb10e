"""The pages' examples as data: which shell blocks run, what each curl call may answer, and
whether a block printed what its output block shows (docs/examples.md, "How the examples
are tested", is the user-facing description of this notation)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- doc-test: skip \((?P<reason>[^)]+)\) -->$")
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=", re.MULTILINE)
CURL = re.compile(r"(?<![\w.-])curl\s")
TRAILING_COMMENT = re.compile(r"\s{2,}#\s(?P<comment>.*)$")
STATUS = re.compile(r"\b[1-5]\d\d\b")
VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")

RUNNABLE = ("sh", "bash")
OUTPUTS = ("json", "text")
ANY = "…"  # a shown string "…": any value; inside a string: any characters
REST = "\x00rest"  # what a bare … (outside a string) becomes: "and more members/items"


@dataclass(frozen=True)
class Output:
    """The fenced block right after a runnable one: what it prints."""

    kind: str  # "json" or "text"
    line: int  # of its first line in the page
    text: str


@dataclass(frozen=True)
class Block:
    number: int  # among the page's shell blocks, from 1
    line: int  # of its first command in the page
    text: str
    skip: str | None
    output: Output | None = None

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0] if self.text else ""


@dataclass(frozen=True)
class Expect:
    """What the page says one curl call answers."""

    line: int  # in the block, from 0
    statuses: tuple[str, ...] = ()  # empty: any 2xx
    comment: str = ""


def _fences(lines: list[str]) -> list[tuple[str, int, int]]:
    """(info, opening line, closing line) of every fenced block, from 0."""
    fences: list[tuple[str, int, int]] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        fences.append((fence.group(1), i, end))
        i = end + 1
    return fences


def shell_blocks(page: str) -> list[Block]:
    """Every ```bash / ```sh block, with the ```json / ```text block right after it (only
    blank lines between) as its output, and its skip reason if a skip comment precedes it."""
    lines = page.splitlines()
    fences = _fences(lines)
    blocks: list[Block] = []
    for index, (info, start, end) in enumerate(fences):
        if info not in RUNNABLE:
            continue
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP.match(before.strip())
        output = None
        if index + 1 < len(fences):
            kind, o_start, o_end = fences[index + 1]
            between = lines[end + 1 : o_start]
            if kind in OUTPUTS and all(not line.strip() for line in between):
                output = Output(kind, o_start + 2, "\n".join(lines[o_start + 1 : o_end]) + "\n")
        text = "\n".join(lines[start + 1 : end]) + "\n"
        blocks.append(Block(len(blocks) + 1, start + 2, text, skip and skip["reason"], output))
    return blocks


class ConventionError(ValueError):
    """A block that breaks the convention (a value shown where nothing checks it)."""


def _expect(line: int, comment: str) -> Expect:
    if "{" in comment:
        raise ConventionError(
            f"block line {line}: {comment!r} shows a value in a comment, where nothing checks "
            "it: show the answer in a ```json block right after the shell block"
        )
    return Expect(line, tuple(STATUS.findall(comment)), comment)


def expectations(block: str) -> list[Expect]:
    """One per curl call of the block, in order: the statuses its result comment names
    (comment lines right after the call starting with a status, or a comment at the end
    of its last line), none for "any 2xx"."""
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


def _bare_ellipses(shown: str) -> str:
    """JSON text with each … outside a string made a REST marker: a member `"\\0rest": 0`
    in an object, an item `"\\0rest"` in a list."""
    out: list[str] = []
    stack: list[str] = []
    in_string = escaped = False
    marker = json.dumps(REST)
    for char in shown:
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
        elif char == ANY:
            out.append(f"{marker}: 0" if stack and stack[-1] == "{" else marker)
            continue
        out.append(char)
    return "".join(out)


def json_values(text: str) -> list[Any]:
    """The JSON values in `text`, one after another (whitespace between)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return values
        value, i = decoder.raw_decode(text, i)
        values.append(value)


def shown_values(shown: str) -> list[Any]:
    """A ```json output block: its values, with the notation's … made markers."""
    return json_values(_bare_ellipses(shown))


def _string_matches(pattern: str, actual: str, variables: dict[str, str]) -> bool:
    expanded = VARIABLE.sub(lambda m: variables.get(m[1], m[0]), pattern)
    if ANY not in expanded:
        return expanded == actual
    regex = ".*".join(re.escape(part) for part in expanded.split(ANY))
    return re.fullmatch(regex, actual, re.S) is not None


def differences(shown: Any, actual: Any, variables: dict[str, str], path: str = "$") -> list[str]:
    """Where `actual` is not what `shown` shows: exact, except for the notation."""
    if shown == ANY:
        return []
    if isinstance(shown, str):
        ok = isinstance(actual, str) and _string_matches(shown, actual, variables)
        return [] if ok else [f"{path}: shown {shown!r}, got {actual!r}"]
    if isinstance(shown, dict):
        return _dict_differences(shown, actual, variables, path)
    if isinstance(shown, list):
        return _list_differences(shown, actual, variables, path)
    if type(shown) is not type(actual) or shown != actual:
        return [f"{path}: shown {shown!r}, got {actual!r}"]
    return []


def _dict_differences(
    shown: dict[str, Any], actual: Any, variables: dict[str, str], path: str
) -> list[str]:
    if not isinstance(actual, dict):
        return [f"{path}: shown an object, got {actual!r}"]
    found: list[str] = []
    keys = [key for key in shown if key != REST]
    for key in keys:
        if key not in actual:
            found.append(f"{path}.{key}: shown, missing from the answer")
        else:
            found.extend(differences(shown[key], actual[key], variables, f"{path}.{key}"))
    if REST not in shown:
        extra = sorted(set(actual) - set(keys))
        if extra:
            found.append(f"{path}: the answer has keys the page does not show: {extra} (add …)")
    return found


def _list_differences(
    shown: list[Any], actual: Any, variables: dict[str, str], path: str
) -> list[str]:
    if not isinstance(actual, list):
        return [f"{path}: shown a list, got {actual!r}"]
    rest = bool(shown) and shown[-1] == REST
    items = shown[:-1] if rest else shown
    if len(actual) < len(items) or (not rest and len(actual) != len(items)):
        more = " or more" if rest else ""
        return [f"{path}: shown {len(items)} item(s){more}, got {len(actual)}"]
    found: list[str] = []
    for i, item in enumerate(items):
        found.extend(differences(item, actual[i], variables, f"{path}[{i}]"))
    return found


def _text_differences(shown: str, actual: str, variables: dict[str, str]) -> list[str]:
    """Line by line; a line that is only … stands for any lines (none included)."""
    patterns = [line.rstrip() for line in shown.strip("\n").splitlines()]
    regex = "".join(
        "(?:[^\n]*\n)*?" if line == ANY else _line_regex(line, variables) + "\n"
        for line in patterns
    )
    got = "".join(line.rstrip() + "\n" for line in actual.strip("\n").splitlines())
    if re.fullmatch(regex, got) is not None:
        return []
    return [f"the output is not what the page shows:\n--- shown ---\n{shown}--- got ---\n{got}"]


def _line_regex(line: str, variables: dict[str, str]) -> str:
    expanded = VARIABLE.sub(lambda m: variables.get(m[1], m[0]), line)
    return "[^\\n]*".join(re.escape(part) for part in expanded.split(ANY))


def output_differences(output: Output, stdout: str, variables: dict[str, str]) -> list[str]:
    """What differs between a block's output block and what the block printed."""
    if output.kind == "text":
        return _text_differences(output.text, stdout, variables)
    shown = shown_values(output.text)
    try:
        got = json_values(stdout)
    except ValueError as exc:
        return [f"the output is not JSON ({exc}): {stdout[:300]!r}"]
    if len(got) != len(shown):
        return [f"shown {len(shown)} JSON value(s), the block printed {len(got)}: {stdout[:300]!r}"]
    found: list[str] = []
    for i, (want, have) in enumerate(zip(shown, got, strict=True)):
        found.extend(differences(want, have, variables, f"${i}" if len(shown) > 1 else "$"))
    return found
