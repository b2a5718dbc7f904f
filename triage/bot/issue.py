"""Read a bug report: find the log text, the environment dump and the attachments in an issue body.

Order (after normalising `\\r\\n`): issue-form sections (`### Title`, `_No response_` = empty) ->
fenced blocks (backticks or tildes, any length) / `<details>` / `<pre>` -> attachment URLs
(`.log`, `.txt`) -> screenshots (counted, so the bot can ask for text). The `collect_env`
section is kept apart: parsed for facts, never matched as log text. Unfenced log lines are used
only when the body has no block at all. Everything here is data: nothing is executed or rendered.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from triage.bot.collect_env import looks_like_collect_env

MAX_BODY = 1 << 20  # forges cap bodies at 64 KiB; anything longer is cut here

_SECTION = re.compile(r"^#{2,3} (.{1,200})$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})([^`]{0,80})$")
_DETAILS_OPEN = re.compile(r"<details\b[^>]{0,200}>", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)
_SUMMARY = re.compile(r"<summary\b[^>]{0,200}>(.{0,500}?)</summary\s*>", re.IGNORECASE)
_PRE_OPEN = re.compile(r"<pre\b[^>]{0,200}>", re.IGNORECASE)
_PRE_CLOSE = re.compile(r"</pre\s*>", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]{0,200}>")
_ATTACHMENT = re.compile(
    r"https?://[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?/[A-Za-z0-9._~%/-]{0,400}?"
    r"(?:/files/[0-9]{1,20}/|/attachments/)[A-Za-z0-9._~%-]{1,200}"
)
_IMAGE = re.compile(r"!\[[^\]]{0,200}\]\(|<img\b", re.IGNORECASE)
_LOGLIKE = re.compile(
    r"Traceback \(most recent call last\)|^\s*File \"|Error\b|ERROR|WARNING|CRITICAL|"
    r"\b(?:INFO|DEBUG) \d\d-\d\d|Exception\b|NCCL|CUDA|Xid|Killed|\[rank\d",
)
_ENV_TITLE = re.compile(r"environment|collect_env|env\b|system info", re.IGNORECASE)
_SKIP_TITLE = re.compile(r"before submitting|checklist|code of conduct", re.IGNORECASE)
_NO_RESPONSE = "_No response_"


@dataclass
class Block:
    """A run of text to triage, with the body line it starts on (for original line numbers)."""

    name: str
    text: str
    first_line: int


@dataclass
class ParsedIssue:
    blocks: list[Block] = field(default_factory=list)  # log text: triaged
    env_text: str = ""  # collect_env output: parsed for facts only
    env_section: bool = False  # the report has an environment section or block at all
    attachments: list[str] = field(default_factory=list)
    images: int = 0
    sections: dict[str, str] = field(default_factory=dict)


@dataclass
class _Open:
    kind: str  # fence | pre
    start: int
    fence: str = ""
    env: bool = False
    lines: list[str] = field(default_factory=list)


def _attachment_ok(url: str) -> bool:
    name = url.rsplit("/", 1)[-1].lower()
    # Named text files, or opaque ids (Gitea/Forgejo attachment UUIDs); binaries dropped on fetch.
    return name.endswith((".log", ".txt", ".out", ".err")) or "." not in name


def parse_issue(body: str, *, label: str = "issue") -> ParsedIssue:
    """Split an issue body (or a comment) into log blocks, the environment text and attachments."""
    text = (body or "")[:MAX_BODY].replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    out = ParsedIssue()
    section = ""
    section_lines: dict[str, list[str]] = {}
    details_env: list[bool] = []  # stack: is the enclosing <details> the collect_env one
    prose: list[tuple[int, str]] = []
    current: _Open | None = None
    counter = 0

    def close(block: _Open) -> None:
        nonlocal counter
        content = "\n".join(block.lines)
        if block.kind == "pre":
            content = html.unescape(_TAG.sub("", content))
        if not content.strip() or content.strip() == _NO_RESPONSE:
            return
        is_env = block.env or (looks_like_collect_env(content) and "Traceback" not in content)
        if is_env:
            out.env_section = True
            out.env_text += content + "\n"
            return
        counter += 1
        out.blocks.append(
            Block(name=f"{label} block {counter}", text=content, first_line=block.start)
        )

    for number, line in enumerate(lines, start=1):
        if current is not None:
            if current.kind == "fence":
                stripped = line.strip()
                if (
                    stripped
                    and set(stripped) == {current.fence[0]}
                    and len(stripped) >= len(current.fence)
                    and len(line) - len(line.lstrip()) <= 3
                ):
                    close(current)
                    current = None
                    continue
                current.lines.append(line)
                continue
            close_pre = _PRE_CLOSE.search(line)
            if close_pre:
                current.lines.append(line[: close_pre.start()])
                close(current)
                current = None
            else:
                current.lines.append(line)
            continue
        heading = _SECTION.match(line)
        if heading and not details_env:
            section = heading.group(1).strip()
            section_lines.setdefault(section, [])
            if _ENV_TITLE.search(section):
                out.env_section = True
            continue
        if section:
            section_lines[section].append(line)
        in_env = bool(_ENV_TITLE.search(section)) or any(details_env)
        fence = _FENCE_OPEN.match(line)
        if fence:
            current = _Open("fence", number + 1, fence=fence.group(1), env=in_env)
            continue
        for _ in _DETAILS_OPEN.finditer(line):
            summary = _SUMMARY.search(line)
            details_env.append(bool(summary and "collect_env" in summary.group(1)))
        if details_env and any(details_env):
            out.env_section = True
        pre = _PRE_OPEN.search(line)
        if pre:
            rest = line[pre.end() :]
            close_pre = _PRE_CLOSE.search(rest)
            block = _Open(
                "pre", number, env=in_env, lines=[rest[: close_pre.start()] if close_pre else rest]
            )
            if close_pre:
                close(block)
            else:
                current = block
            continue
        for _ in _DETAILS_CLOSE.finditer(line):
            if details_env:
                details_env.pop()
        if not _SKIP_TITLE.search(section) and not in_env:
            prose.append((number, line))
    if current is not None:  # an unclosed fence or <pre> runs to the end of the body
        close(current)
    out.sections = {k: "\n".join(v).strip() for k, v in section_lines.items()}
    out.sections = {k: ("" if v == _NO_RESPONSE else v) for k, v in out.sections.items()}
    if not out.blocks:
        loglike = [(n, ln) for n, ln in prose if _LOGLIKE.search(ln)]
        if len(loglike) >= 2:
            first = loglike[0][0]
            kept = [ln for n, ln in prose if n >= first]
            out.blocks.append(Block(name=f"{label} text", text="\n".join(kept), first_line=first))
    seen: set[str] = set()
    for m in _ATTACHMENT.finditer(text):
        url = m.group(0).rstrip(".,;")
        if url not in seen and _attachment_ok(url):
            seen.add(url)
            out.attachments.append(url)
    out.images = len(_IMAGE.findall(text))
    return out
