"""Draft a signature YAML skeleton from a cluster of unrecognized lines.

The pattern comes from the cluster's masked templates (literal text escaped, each mask turned back
into the regex of what it replaced), the cluster's lines become `examples.match`, the nearest known
signatures `related`, and the runs `provenance`. Title, layer and fixes are left as TODO so the file
fails `triage kb lint` until a human fills them in; then it passes.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from triage.history.cluster import _EXCEPTION_RE
from triage.history.query import ClusterDetail, cluster_detail, when
from triage.kb.records import Signature
from triage.redact import REDACTED, redact

# What each mask of `textutil.mask` replaced, as a portable regex (no nested quantifiers).
PLACEHOLDER_REGEX: dict[str, str] = {
    "HEX": r"0x[0-9a-fA-F]+",
    "UUID": r"[0-9a-fA-F-]{36}",
    "PCI": r"[0-9a-fA-F:.]+",
    "PATH": r"/[\w./+@-]+",
    "HASH": r"[0-9a-fA-F]{12,}",
    "N": r"[0-9][0-9.,]*",
}
_PLACEHOLDER_RE = re.compile(r"<(HEX|UUID|PCI|PATH|HASH|N)>|" + re.escape(REDACTED))
# A redacted secret matches whatever secret the next log holds there (one word).
_REDACTED_REGEX = r"\S+"
_META = set(r"\.^$*+?()[]{}|")
# NCCL's "host:pid:tid [dev] " prefix names the machine: never part of a pattern.
_NCCL_PREFIX_RE = re.compile(r"^\S+:<N>:<N> \[<N>\] ")
MAX_PATTERN_CHARS = 160
MAX_PATTERNS = 3
MAX_EXAMPLES = 4


def _escape(text: str) -> str:
    return "".join("\\" + ch if ch in _META else ch for ch in text)


def pattern_text(template: str) -> str:
    """The part of a template a pattern is made of: from the exception class on, at most
    `MAX_PATTERN_CHARS`, cut at a word boundary, without host-specific prefixes."""
    text = _NCCL_PREFIX_RE.sub("", template)
    found = _EXCEPTION_RE.search(text)
    if found and found.start() < len(text) // 2:
        text = text[found.start() :]
    if len(text) > MAX_PATTERN_CHARS:
        cut = text.rfind(" ", 0, MAX_PATTERN_CHARS)
        text = text[: cut if cut > 40 else MAX_PATTERN_CHARS]
        text = re.sub(r"<[A-Z]*$", "", text)  # never cut inside a placeholder
    return text.strip()


def template_regex(template: str, *, flexible_spaces: bool = False) -> str:
    """A regex that matches every line whose masked message contains this template text."""
    out: list[str] = []
    pos = 0
    space = r"\s+" if flexible_spaces else " "
    for found in _PLACEHOLDER_RE.finditer(template):
        out.append(_escape(template[pos : found.start()]).replace(" ", space))
        out.append(PLACEHOLDER_REGEX[found.group(1)] if found.group(1) else _REDACTED_REGEX)
        pos = found.end()
    out.append(_escape(template[pos:]).replace(" ", space))
    return "".join(out)


def slug(text: str, fallback: str) -> str:
    words = re.findall(r"[a-z0-9]+", _PLACEHOLDER_RE.sub(" ", text).lower())
    out = ""
    for word in words:
        if len(out) + len(word) + 1 > 60:
            break
        out = f"{out}-{word}" if out else word
    return out if len(out) >= 3 else fallback


def yaml_str(text: str) -> str:
    """A YAML scalar: single-quoted when printable, else JSON's double-quoted escapes."""
    if all(ch == "\t" or ch.isprintable() for ch in text):
        return "'" + text.replace("'", "''") + "'"
    return json.dumps(text, ensure_ascii=True)


@dataclass
class Draft:
    id: str
    text: str
    patterns: list[str]
    examples: list[str]
    related: list[str]


def _fires(regex: str, line: str) -> bool:
    from triage.regexes import compile_linear
    from triage.textutil import strip_ansi

    try:
        return compile_linear(regex).search(strip_ansi(line)) is not None
    except Exception:  # an engine refusing the pattern: treated as not firing
        return False


def _near_miss(regex: str, line: str) -> str | None:
    """The example line cut in the middle of what the pattern matched: it must not fire."""
    from triage.regexes import compile_linear
    from triage.textutil import strip_ansi

    text = strip_ansi(line)
    found = compile_linear(regex).search(text)
    if found is None:
        return None
    cut = text[: found.start + max(1, (found.end - found.start) // 2)].rstrip()
    return cut if cut and not _fires(regex, cut) else None


def draft_cluster(
    conn: sqlite3.Connection, cluster_id: int, signatures: Sequence[Signature] = ()
) -> Draft:
    """The YAML skeleton for one cluster (see the module docstring)."""
    detail = cluster_detail(conn, cluster_id)
    patterns: list[str] = []
    examples: list[str] = []
    for template, _, _ in detail.templates:
        lines = [
            redact(t)  # a database written by an older triage may hold secrets
            for (t,) in conn.execute(
                "SELECT text FROM unknown_lines WHERE cluster = ? AND fingerprint = ? ORDER BY id",
                (cluster_id, template),
            )
        ]
        lines = list(dict.fromkeys(lines)) or [detail.row.example]
        body = pattern_text(template)
        regex = template_regex(body)
        if not all(_fires(regex, line) for line in lines):
            regex = template_regex(body, flexible_spaces=True)
        fitting = [line for line in lines if _fires(regex, line)]
        if not fitting or regex in patterns:
            examples.extend(x for x in fitting if x not in examples)
            continue
        if len(patterns) < MAX_PATTERNS:
            patterns.append(regex)
            examples.extend(x for x in fitting[:2] if x not in examples)
    examples = examples[:MAX_EXAMPLES]
    catalog_lines = catalog_proposal(examples or [detail.row.example])
    proposed = catalog_lines[0] if catalog_lines else None
    if proposed and not patterns and all(_fires(proposed, x) for x in examples):
        patterns = [proposed]  # the source's own wording when the cluster gave none
    first = patterns[0] if patterns else _escape(detail.row.template[:MAX_PATTERN_CHARS])
    if not patterns:
        patterns = [first]
    near = _near_miss(first, examples[0]) if examples else None
    from triage.kb.commands import closest_known

    probe = examples[0] if examples else detail.row.template
    related = [sig.id for sig, _, _ in closest_known(signatures, probe)]
    sig_id = slug(pattern_text(detail.row.template), f"unrecognized-cluster-{cluster_id}")
    text = render(
        detail, sig_id, patterns, examples, near, related, cluster_id, conn, catalog_lines or []
    )
    return Draft(sig_id, text, patterns, examples, related)


def catalog_proposal(lines: Sequence[str]) -> list[str] | None:
    """[pattern, YAML lines for references and applies_to] from the message catalog's entry of the
    first line it locates, or None (no catalog, or no line located)."""
    from triage.catalog import open_catalog
    from triage.kb.schema import COMPONENTS

    catalog = open_catalog()
    if catalog is None:
        return None
    for line in lines:
        prop = catalog.proposal(line)
        if prop is None:
            continue
        src = prop.located.source
        where = ", ".join(x for x in (src.file, src.function) if x)
        out = [prop.pattern, f"# catalog: {src.kind} of {src.project} {src.releases}, {where}"]
        out += ["references:"] + [f"  - {yaml_str(r)}" for r in prop.references]
        component = {"open-gpu-kernel-modules": "driver"}.get(prop.project, prop.project)
        if component in COMPONENTS and prop.first:
            out += ["applies_to:", "  versions:", f"    {component}:"]
            out.append(f"      introduced: {yaml_str(prop.first)}")
            if not prop.newest:
                out.append(f"      last_affected: {yaml_str(prop.last)}")
            out.append(
                "  note: "
                + yaml_str(
                    f"from the message catalog: catalogued {prop.project} "
                    f"releases {src.releases} print it (older ones may too)"
                )
            )
        return out
    return None


def _provenance(detail: ClusterDetail, conn: sqlite3.Connection, cluster_id: int) -> str:
    parts = []
    for number, run_id, ts, host, version in detail.runs[:5]:
        inputs = conn.execute(
            "SELECT name, digest FROM inputs WHERE run = ? ORDER BY rowid LIMIT 2",
            (number,),
        ).fetchall()
        names = ", ".join(f"{n}@{d}" if d else n for n, d in inputs)
        bits = [f"run {number}", when(ts) + " UTC"]
        bits += [f"id {run_id}"] if run_id else []
        bits += [f"host {host}"] if host else []
        bits += [version] if version else []
        bits += [names] if names else []
        parts.append(" ".join(bits[:1]) + " (" + "; ".join(bits[1:]) + ")")
    more = f" and {len(detail.runs) - 5} more" if len(detail.runs) > 5 else ""
    return (
        f"unrecognized cluster {cluster_id} of the triage history, "
        f"{detail.row.lines} lines in {detail.row.runs} runs: " + ", ".join(parts) + more
    )


def render(
    detail: ClusterDetail,
    sig_id: str,
    patterns: list[str],
    examples: list[str],
    near: str | None,
    related: list[str],
    cluster_id: int,
    conn: sqlite3.Connection,
    catalog_lines: Sequence[str] = (),
) -> str:
    row = detail.row
    hosts = f" on {len(row.hosts)} host(s)" if row.hosts else ""
    summary = (
        f"Unrecognized failure drafted from triage history cluster {cluster_id} "
        f"({row.lines} lines in {row.runs} runs{hosts}): {pattern_text(row.template)[:200]}"
    )
    out = [
        f"# Drafted by `triage draft {cluster_id}` from an unrecognized cluster: {row.lines} "
        "lines in",
        f"# {row.runs} runs{hosts}, first {when(row.first_ts)}, last {when(row.last_ts)} UTC.",
        "# Fill in title, layer and fixes (and review summary, severity, the pattern and the near",
        "# miss), move it to signatures/<layer>/<id>.yaml, then run `triage kb lint`.",
        "schema_version: 1",
        f"id: {sig_id}",
        "title: TODO  # 10-120 characters: what broke, in the log's words",
        "layer: TODO  # node | harness | engine | model",
        "kind: cause",
        "severity: error",
        "status: open",
        f"summary: {yaml_str(summary)}",
        "match:",
    ]
    out += [f"  - regex: {yaml_str(p)}" for p in patterns]
    if catalog_lines and catalog_lines[0] not in patterns:
        # the source's template covers every variable part: often wider than the cluster's text
        out.append(f"  # - regex: {yaml_str(catalog_lines[0])}  # from the source's template")
    if related:
        out.append(f"related: [{', '.join(related)}]  # nearest known (rapidfuzz): keep true ones")
    out.extend(catalog_lines[1:])  # where the message is printed, and in which releases
    out += [
        "fixes: []  # TODO: - do: ...; confidence: demonstrated | suggested | lead",
        "provenance:",
        f"  reproduction: {yaml_str(_provenance(detail, conn, cluster_id))}",
        "examples:",
        "  match:",
    ]
    out += [f"    - {yaml_str(x)}" for x in examples]
    out.append("  no_match:")
    if near:
        out.append(f"    - {yaml_str(near)}  # TODO: prefer a real line that must not fire")
    else:
        out.append("    - 'TODO: a real line that must not fire'")
    out.append("tags: [draft]")
    return "\n".join(out) + "\n"


def cluster_lines(
    conn: sqlite3.Connection, cluster_id: int, limit: int = 2 * MAX_EXAMPLES
) -> list[str]:
    """The cluster's distinct unrecognized lines as recorded, oldest first (for `--llm` drafts)."""
    rows = conn.execute(
        "SELECT text FROM unknown_lines WHERE cluster = ? ORDER BY id", (cluster_id,)
    )
    return list(dict.fromkeys(t for (t,) in rows))[:limit]


def provenance(conn: sqlite3.Connection, cluster_id: int) -> str:
    """The `provenance.reproduction` text of a draft: the cluster's runs, hosts and inputs."""
    return _provenance(cluster_detail(conn, cluster_id), conn, cluster_id)
