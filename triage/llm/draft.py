"""`triage draft --llm URL --llm-model NAME CLUSTER`: a model drafts a signature for a cluster of
the unknown queue, and the draft is written only if it passes the knowledge base's own checks.

The model sees the cluster's lines (cleaned as any evidence: prompts elided, secrets redacted),
the deterministic draft's patterns (`triage.history.draft`) as a starting point, and the nearest
known signatures so that it does not re-invent one. It answers with patterns, a title, a layer, a
cause and fixes; every fix is written with confidence `lead` (nobody has tried it yet) and the
status `open`. Then the draft must:

1. validate against the signature schema (`triage.kb.load.load_signature_file`);
2. pass `triage kb lint`'s per-signature checks: syntax and portability, linear time, its own
   examples, no generic or frequent healthy line;
3. fire on every line of the cluster;
4. fire on no log of the healthy corpus (`corpus/healthy/`), scanned by the real engine.

Only then is the YAML written, for a human to review; otherwise the reasons are printed.
"""

from __future__ import annotations

import json
import re
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.api import KnowledgeBase
from triage.history.draft import (
    _near_miss,
    cluster_lines,
    draft_cluster,
    provenance,
    yaml_str,
)
from triage.kb.records import LAYERS
from triage.llm import cache
from triage.llm.client import Completion, LlmError, endpoint, post_chat
from triage.llm.evidence import clean
from triage.llm.step import Sender, Settings

DRAFT_PROMPT_VERSION = "triage-draft/1"
_ID_RE = re.compile(r"[a-z0-9][a-z0-9-]{2,59}")
LAYER_HELP = (
    "node (GPU, driver, kernel, NVLink/fabric, host hardware), harness (container, launcher, "
    "orchestration, network setup), engine (vLLM / SGLang / PyTorch / NCCL / CUDA runtime), "
    "model (weights, checkpoint, tokenizer, model config)"
)

SYSTEM_PROMPT = """\
You write failure signatures for a log triage knowledge base of LLM inference servers.
Given lines of one unexplained failure, answer with a JSON object:
- "id": lower-case words joined by hyphens, naming the failure (3-60 characters);
- "title": what broke, in the log's own words (10-120 characters);
- "layer": one of node, harness, engine, model;
- "cause": two or three sentences on why this happens (at least 20 characters);
- "patterns": one to three regular expressions (Python re syntax, no lookaround, no \
backreferences, at most two .* gaps) that match these lines and would not match unrelated \
healthy log lines; escape literal dots and brackets; replace numbers, addresses and paths by \
character classes;
- "fixes": one to three concrete things to try, each {"do": "..."}.
Answer with the JSON object only."""


@dataclass
class DraftOutcome:
    text: str | None = None  # the YAML, when every check passed
    sig_id: str = ""
    problems: list[str] = field(default_factory=list)
    body: bytes | None = None  # dry run: the request body


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["id", "title", "layer", "cause", "patterns", "fixes"],
        "properties": {
            "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{2,59}$"},
            "title": {"type": "string", "minLength": 10, "maxLength": 120},
            "layer": {"type": "string", "enum": ["node", "harness", "engine", "model"]},
            "cause": {"type": "string", "minLength": 20, "maxLength": 800},
            "patterns": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "minLength": 3, "maxLength": 200},
            },
            "fixes": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["do"],
                    "properties": {"do": {"type": "string", "minLength": 5, "maxLength": 300}},
                },
            },
        },
    }


def payload(
    model: str, lines: list[str], patterns: list[str], related: list[str]
) -> dict[str, Any]:
    shown = "\n".join(f"- {line}" for line in lines)
    user = (
        f"Lines of the failure (secrets redacted, logged prompts elided):\n{shown}\n\n"
        f"A mechanical pattern drafted from them (improve it if you can):\n"
        + "\n".join(f"- {p}" for p in patterns)
        + f"\n\nLayers: {LAYER_HELP}.\n"
    )
    if related:
        user += f"Nearest known signatures (do not duplicate them): {', '.join(related)}\n"
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ],
        "temperature": 0,
        "seed": 0,
        "max_tokens": 900,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "triage_signature_draft", "schema": _schema(), "strict": True},
        },
    }


def render(answer: dict[str, Any], lines: list[str], reproduction: str, model: str) -> str:
    out = [
        f"# Drafted by `triage draft --llm` with {model} from an unrecognized cluster; it passed",
        "# the schema, lint, the cluster's lines and the healthy corpus. Review every field: the",
        "# fixes are leads nobody has tried. Then move it to signatures/<layer>/<id>.yaml.",
        "schema_version: 1",
        f"id: {answer['id']}",
        f"title: {yaml_str(answer['title'])}",
        f"layer: {answer['layer']}",
        "kind: cause",
        "severity: error",
        "status: open",
        f"summary: {yaml_str(' '.join(answer['cause'].split()))}",
        "match:",
        *[f"  - regex: {yaml_str(p)}" for p in answer["patterns"]],
        "fixes:",
    ]
    for fix in answer["fixes"]:
        out += [f"  - do: {yaml_str(' '.join(fix['do'].split()))}", "    confidence: lead"]
    out += [
        "provenance:",
        f"  reproduction: {yaml_str(reproduction + f'; drafted by {model}')}",
        "examples:",
        "  match:",
        *[f"    - {yaml_str(line)}" for line in lines],
    ]
    # The schema wants a near miss: the first line cut inside what the first pattern matched.
    try:
        near = _near_miss(answer["patterns"][0], lines[0]) if lines else None
    except Exception:  # a pattern that does not compile: the checks say so
        near = None
    if near:
        out += ["  no_match:", f"    - {yaml_str(near)}  # a cut line: prefer a real one"]
    out += [
        "tags: [draft, llm-draft]",
    ]
    return "\n".join(out) + "\n"


def _parse(content: str) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except ValueError:
        raise ValueError("the answer is not JSON") from None
    expected = {"id", "title", "layer", "cause", "patterns", "fixes"}
    if not isinstance(data, dict) or set(data) != expected:
        raise ValueError("the answer is not a signature draft object")
    patterns, fixes = data["patterns"], data["fixes"]
    if not isinstance(patterns, list) or not 1 <= len(patterns) <= 3:
        raise ValueError("the answer needs one to three patterns")
    if not all(isinstance(p, str) for p in patterns):
        raise ValueError("a pattern is not a string")
    if (
        not isinstance(fixes, list)
        or not fixes
        or not all(isinstance(f, dict) and isinstance(f.get("do"), str) for f in fixes)
    ):
        raise ValueError("the answer's fixes are not [{do: ...}]")
    for key in ("id", "title", "layer", "cause"):
        if not isinstance(data[key], str):
            raise ValueError(f"the answer's {key} is not a string")
    if data["layer"] not in LAYERS:
        raise ValueError(f"layer {data['layer']!r} is not one of {', '.join(LAYERS)}")
    if not _ID_RE.fullmatch(data["id"]):
        raise ValueError(f"id {data['id'][:80]!r} is not lower-case words joined by hyphens")
    return data


def _cluster_misses(patterns: list[str], lines: list[str]) -> list[str]:
    from triage.regexes import compile_linear
    from triage.textutil import strip_ansi

    try:
        compiled = [compile_linear(p) for p in patterns]
        return [
            f"does not fire on the cluster line {x[:100]!r}"
            for x in lines
            if not any(c.search(strip_ansi(x)) for c in compiled)
        ]
    except Exception as exc:  # any engine's refusal is a lint failure
        return [f"lint: a pattern does not compile: {exc}"]


def check(
    text: str, sig_id: str, layer: str, patterns: list[str], lines: list[str], healthy: Path
) -> list[str]:
    """Every reason this draft must not be written (empty when it may)."""
    from triage.kb import lint
    from triage.kb.load import load_signature_file

    misses = _cluster_misses(patterns, lines)
    if misses:
        return misses  # the most telling reason first: it does not even match its own cluster
    with tempfile.TemporaryDirectory(prefix="triage-draft-") as tmp:
        path = Path(tmp) / layer / f"{sig_id}.yaml"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        sig, errors = load_signature_file(path)
    if sig is None or errors:
        return [f"schema: {e.field}: {e.message}" for e in errors]
    shown = f"{sig_id}.yaml"
    issues = (
        lint.check_syntax(sig, shown)
        + lint.check_linear_time(sig, shown)
        + lint.check_examples(sig, shown)
        + lint.check_generic(sig, shown)
        + lint.check_frequent_benign(sig, shown)
    )
    problems = [f"lint: {i.field}: {i.message}" for i in issues]
    if problems:
        return problems
    problems += [
        f"does not fire on the cluster line {x[:100]!r}"
        for x in lines
        if not lint.line_fires(sig, x)
    ]
    problems += _healthy_hits(sig, healthy)
    return problems


def _healthy_hits(sig: Any, healthy: Path) -> list[str]:
    """The healthy logs on which the real engine, with only this signature, diagnoses it."""
    from triage.api import Engine
    from triage.kb.store import records

    logs = sorted(p for p in healthy.glob("*.log") if p.is_file()) if healthy.is_dir() else []
    if not logs:
        return [f"no healthy corpus at {healthy}: cannot show the draft stays silent"]
    engine = Engine(KnowledgeBase(records([sig])))
    report = engine.run([str(p) for p in logs])
    fired = {e.input for h in report.hypotheses for e in h.evidence}
    return [f"fires on the healthy log {name}" for name in sorted(fired)]


def draft_with_llm(
    conn: sqlite3.Connection,
    cluster_id: int,
    kb: KnowledgeBase,
    settings: Settings,
    healthy: Path,
    *,
    send: Sender = post_chat,
) -> DraftOutcome:
    base = draft_cluster(conn, cluster_id, kb.signatures)
    lines = [clean(x) for x in cluster_lines(conn, cluster_id)]
    body = payload(settings.model, lines, base.patterns, base.related)
    from triage.llm.prompt import encode

    encoded = encode(body)
    if settings.dry_run:
        return DraftOutcome(body=encoded)
    cache_key = cache.key(
        cache.digest(body["messages"][1]["content"]),
        kb.digest,
        settings.model,
        DRAFT_PROMPT_VERSION,
    )
    completion = cache.load(cache_key) if settings.use_cache else None
    fresh = completion is None
    try:
        if completion is None:
            completion = send(
                endpoint(settings.url), encoded, timeout=settings.timeout, api_key=settings.api_key
            )
        answer = _parse(completion.content)
    except (LlmError, ValueError) as exc:
        return DraftOutcome(problems=[str(exc)])
    if answer["id"] in kb.by_id:
        return DraftOutcome(sig_id=answer["id"], problems=[f"id {answer['id']} already exists"])
    text = render(answer, lines, provenance(conn, cluster_id), completion.model or settings.model)
    problems = check(text, answer["id"], answer["layer"], answer["patterns"], lines, healthy)
    if problems:
        return DraftOutcome(sig_id=answer["id"], problems=problems)
    if fresh and settings.use_cache:
        cache.store(cache_key, Completion(completion.content, completion.model))
    return DraftOutcome(text=text, sig_id=answer["id"])
