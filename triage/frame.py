"""Peel the wrappers off a log line and keep them as fields.

Outer wrappers first (markdown paste, CI timestamps, container and journal prefixes, kernel
timestamps), then ANSI remnants, process prefixes (`(EngineCore_DP0 pid=..)`, `[rank0]:`), then the
record header of the producer (vLLM, PyTorch C++, NCCL, SGLang, Python logging, uvicorn).
Each grammar is a linear-time regex anchored at the start of what is left; the order is the order
in which real tools nest them. Only candidate lines are framed, so this never runs on every line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from triage.models import Line
from triage.textutil import strip_ansi
from triage.usertext import elide_user_text

# (name, regex, fields to keep). Outer wrappers: stripped repeatedly in this order.
_OUTER: tuple[tuple[str, re.Pattern[str]], ...] = (
    # markdown paste: list bullets, blockquotes, bold process prefixes
    ("markdown", re.compile(r"^(?:> ?|[-*] (?=\S))")),
    # `gh run view --log`: job<TAB>step<TAB> before the Actions timestamp
    ("gh-run", re.compile(r"^[^\t\n]{1,200}\t[^\t\n]{1,200}\t(?=\d{4}-\d\d-\d\dT)")),
    # GitHub Actions / docker -t / kubectl --timestamps / CRI files: RFC 3339 stamp
    (
        "timestamp",
        re.compile(
            r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) "
            r"(?:(?:stdout|stderr) [FP] )?"
        ),
    ),
    # kubectl logs --prefix
    ("kubectl-prefix", re.compile(r"^\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\] ")),
    # docker compose: "vllm-1  | ", compose v1 "vllm_1 | "
    ("compose", re.compile(r"^(?P<service>[A-Za-z0-9][\w.-]{0,62}?)(?:[-_]\d{1,3})? {0,40}\| ")),
    # journalctl short / short-precise / short-iso / short-monotonic, incl. `journalctl -k`
    (
        "journal",
        re.compile(
            r"^(?P<ts>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?"
            r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"
            r"|\[ *\d+\.\d+\]) (?P<host>[\w.-]+) (?P<unit>[\w@.:/-]+?)(?:\[(?P<pid>\d+)\])?: "
        ),
    ),
    # dmesg: raw, -T (ctime) and --time-format iso
    (
        "dmesg",
        re.compile(
            r"^(?:\[ *(?P<ts>\d+\.\d+)\]|\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d "
            r"\d\d:\d\d:\d\d \d{4})\]|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d)) ?"
        ),
    ),
)

_PROCESS = re.compile(
    r"^\*{0,2}\((?:(?P<proc>[A-Za-z][\w .-]{0,60}?)(?: rank=(?P<rank>\d+))? )?pid=(?P<pid>\d+)"
    r"(?:, ip=[\d.:a-fA-F]+)?\)\*{0,2} ?"
)
_RANK_TAG = re.compile(r"^\[(?P<rank>rank\d+)\]:")
_STAGE_TAG = re.compile(r"^\[Stage-\d+\] ")
_RAY_REPEAT = re.compile(r" \[repeated (?P<n>\d+)x across cluster\]\s*$")

_HEADERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # vLLM: "INFO 04-28 15:55:45 worker.py:157] " and "INFO 10-25 13:08:43 [core.py:708] "
    (
        "vllm",
        re.compile(
            r"^(?:\S+ )?(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
            r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?(?P<file>[\w./-]+:\d+)\] "
        ),
    ),
    # PyTorch c10 glog style: "[E1129 18:43:39.85 ProcessGroupNCCL.cpp:689] "
    (
        "torch-c10",
        re.compile(
            r"^\[(?P<level>[IWEF])(?P<md>\d{4}) (?P<ts>\d\d:\d\d:\d\d(?:\.\d+)?)(?: \d+)? "
            r"(?P<file>[\w.]+:\d+)\] "
        ),
    ),
    # NCCL debug: "host:pid:tid [0] NCCL WARN "
    (
        "nccl",
        re.compile(
            r"^(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<level>INFO|WARN|TRACE|ERROR) "
        ),
    ),
    # SGLang: "[2025-09-03 18:33:18 TP0] " / "[2025-09-03 18:33:18 DP2 TP2] " / "[2025-11-11 04:05:43] "
    (
        "sglang",
        re.compile(
            r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<ranks>(?: [A-Z]{2,4}\d+){0,4})\] "
        ),
    ),
    # Python logging default: "2025-03-27 21:33:31,320 - INFO - name: "
    (
        "python-logging",
        re.compile(
            r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d{3}) - (?:(?P<name>[\w.]+) - )?"
            r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
        ),
    ),
    # uvicorn: "INFO:     127.0.0.1:58610 - ..."
    ("uvicorn", re.compile(r"^(?P<level>INFO|WARNING|ERROR|CRITICAL|DEBUG): {1,8}")),
)

FRAME_HEAD = 4096

_LEVEL_NAMES = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL", "WARN": "WARNING"}


def frame_line(line: Line) -> Line:
    """Fill the wrapper fields of a line in place and return it."""
    # Users' prompts and the model's answers in request-log lines are never matched (usertext).
    text = line.text or elide_user_text(strip_ansi(line.raw))
    line.text = text
    # Wrappers and headers sit at the start: frame a bounded head, so that a 100 MB line costs
    # what a short one does (the grammars' open-ended classes would otherwise scan all of it).
    tail = text[FRAME_HEAD:]
    rest = text[:FRAME_HEAD]
    wrappers: list[str] = []
    for _ in range(6):  # wrappers nest at most a few deep; bounded, never a loop on odd input
        for name, pattern in _OUTER:
            m = pattern.match(rest)
            if m is None or m.end() == 0:
                continue
            groups = m.groupdict()
            if name == "journal":
                line.host = line.host or groups.get("host")
                line.unit = line.unit or groups.get("unit")
                line.pid = line.pid or groups.get("pid")
            if name == "compose":
                line.unit = line.unit or groups.get("service")
            if name == "kubectl-prefix":
                line.unit = line.unit or groups.get("container")
            ts = groups.get("ts") or groups.get("ctime") or groups.get("iso")
            if ts and not line.timestamp:
                line.timestamp = ts
            wrappers.append(name)
            rest = rest[m.end() :]
            break
        else:
            break
    for _ in range(3):
        m = _PROCESS.match(rest)
        if m:
            line.process = m.group("proc") or line.process or f"pid{m.group('pid')}"
            if m.group("rank"):
                line.process = f"{line.process} rank={m.group('rank')}"
            line.pid = m.group("pid")
            wrappers.append("process")
            rest = rest[m.end() :]
            continue
        m = _RANK_TAG.match(rest) or _STAGE_TAG.match(rest)
        if m:
            if "rank" in m.groupdict() and m.group("rank"):
                line.process = line.process or m.group("rank")
            wrappers.append("tag")
            rest = rest[m.end() :]
            continue
        break
    for name, pattern in _HEADERS:
        m = pattern.match(rest)
        if m is None:
            continue
        groups = m.groupdict()
        level = groups.get("level")
        if level:
            line.level = _LEVEL_NAMES.get(level, level)
        if groups.get("ts") and not line.timestamp:
            line.timestamp = groups["ts"]
        if name == "nccl":
            line.host = line.host or groups.get("host")
            line.pid = line.pid or groups.get("pid")
        if name == "sglang" and groups.get("ranks"):
            line.process = line.process or groups["ranks"].strip()
        wrappers.append(name)
        rest = rest[m.end() :]
        break
    m = _RAY_REPEAT.search(rest)
    if m:
        line.repeated = int(m.group("n"))
        rest = rest[: m.start()]
    line.message = (rest + tail).strip() if tail else rest.strip()
    line.wrappers = tuple(wrappers)
    return line


def detect_format(lines: Iterable[Line]) -> str:
    """Name the input format from a sample of framed lines: outer wrapper + producer, by majority."""
    outer: Counter[str] = Counter()
    inner: Counter[str] = Counter()
    total = 0
    for line in lines:
        total += 1
        outers = [w for w in line.wrappers if w in {n for n, _ in _OUTER}]
        inners = [w for w in line.wrappers if w in {n for n, _ in _HEADERS}]
        if outers:
            outer[outers[0]] += 1
        if inners:
            inner[inners[-1]] += 1
    if total == 0:
        return "empty"
    parts = []
    if outer and outer.most_common(1)[0][1] * 2 >= total:
        parts.append(outer.most_common(1)[0][0])
    if inner:
        parts.append(inner.most_common(1)[0][0])
    return "+".join(parts) or "plain"
