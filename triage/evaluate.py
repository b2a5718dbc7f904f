"""Measure the knowledge base on a corpus: per layer and overall, how often the expected signature
ranks first with evidence on the expected line, how often the first hypothesis names the expected
layer (the case's directory), how often it is in the top 3, how often a failing log got no answer
at all, and false alarms on healthy logs. A subset (an audit round's cases, by `round:` / `tags:`
in the expected.yaml or by a path glob) can be measured alone, so a round's figure is reproducible.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from triage.api import Engine, KnowledgeBase, load_kb
from triage.kb.load import parse_yaml
from triage.models import Report


@dataclass
class CaseResult:
    case: str
    layer: str
    expected: str | None
    expected_line: int | None
    top: str | None
    top_lines: list[int]
    in_top3: bool
    top1: bool
    silent: bool
    false_alarm: bool
    note: str = ""
    layer_ok: bool = False  # the first hypothesis names the expected layer


@dataclass
class EvalResult:
    cases: list[CaseResult] = field(default_factory=list)

    def failing(self) -> list[CaseResult]:
        return [c for c in self.cases if c.expected is not None]

    def healthy(self) -> list[CaseResult]:
        return [c for c in self.cases if c.expected is None]


def corpus_cases(root: Path) -> list[tuple[Path, Path, dict[str, Any]]]:
    """(log, expected.yaml, expectation) for every case under root."""
    out = []
    for exp in sorted(root.rglob("*.expected.yaml")):
        log = exp.with_name(exp.name[: -len(".expected.yaml")] + ".log")
        if not log.exists():
            candidates = sorted(exp.parent.glob(exp.name[: -len(".expected.yaml")] + ".*"))
            candidates = [c for c in candidates if not c.name.endswith(".expected.yaml")]
            if not candidates:
                continue
            log = candidates[0]
        data = parse_yaml(exp.read_text(encoding="utf-8")) or {}
        out.append((log, exp, data))
    return out


def case_tags(data: dict[str, Any]) -> set[str]:
    """A case's selectors: `round: 9` gives 'round-9' (and '9'), each of `tags:` itself."""
    out: set[str] = set()
    rnd = data.get("round")
    if rnd is not None:
        text = str(rnd)
        out |= {text, text if text.startswith("round-") else f"round-{text}"}
    tags = data.get("tags") or []
    if isinstance(tags, str):
        tags = [tags]
    out |= {str(t) for t in tags}
    return out


def selected(
    log: Path, root: Path, data: dict[str, Any], tag: str | None, glob: str | None
) -> bool:
    """Whether a case belongs to the subset: every given selector must hold."""
    if tag is not None and tag not in case_tags(data):
        return False
    if glob is not None:
        try:
            rel = str(log.relative_to(root))
        except ValueError:
            rel = str(log)
        if not (fnmatch(rel, glob) or fnmatch(str(log), glob)):
            return False
    return True


def judge(
    report: Report, expect: dict[str, Any], aliases: dict[str, str]
) -> tuple[bool, bool, bool, bool]:
    """(top1 with evidence on the line, in top 3, silent, false alarm)."""
    expected = expect.get("top")
    line = expect.get("line")
    hyps = report.hypotheses
    silent = not hyps and not report.unrecognized
    if expected is None:
        false_alarm = any(h.severity == "error" for h in hyps) or bool(report.unrecognized)
        return False, False, False, false_alarm
    names = [aliases.get(h.signature, h.signature) for h in hyps]
    top1 = (
        bool(hyps)
        and names[0] == expected
        and (
            line is None
            or any(e.line == line for e in hyps[0].evidence)
            or any(line in x.lines for x in hyps[0].explains if x.signature == expected)
        )
    )
    in_top3 = expected in names[:3] or any(expected in h.alternatives for h in hyps[:3])
    return top1, in_top3, silent, False


def evaluate(
    root: Path,
    kb: KnowledgeBase | None = None,
    *,
    tag: str | None = None,
    glob: str | None = None,
) -> EvalResult:
    """Run every case (or the subset `tag` / `glob` selects). The expected layer of a failing case
    is its directory (`corpus/<layer>/`)."""
    kb = kb or load_kb()
    engine = Engine(kb)
    aliases = {a: s.id for s in kb.signatures for a in s.aliases}
    result = EvalResult()
    for log, _exp, data in corpus_cases(root):
        if not selected(log, root, data, tag, glob):
            continue
        expect = data.get("expect") or {}
        expected = expect.get("top")
        try:
            report = engine.run([str(log)])
        except Exception as exc:  # a crash is a miss, recorded with its reason
            result.cases.append(
                CaseResult(
                    str(log),
                    "?",
                    expected,
                    expect.get("line"),
                    None,
                    [],
                    False,
                    False,
                    True,
                    False,
                    note=f"crash: {exc}",
                )
            )
            continue
        top1, top3, silent, false_alarm = judge(report, expect, aliases)
        top = report.hypotheses[0].signature if report.hypotheses else None
        top_lines = [e.line for e in report.hypotheses[0].evidence] if report.hypotheses else []
        layer = log.parent.name if expected else "healthy"
        layer_ok = bool(report.hypotheses) and report.hypotheses[0].layer == layer
        result.cases.append(
            CaseResult(
                str(log),
                layer,
                expected,
                expect.get("line"),
                top,
                top_lines,
                top3,
                top1,
                silent,
                false_alarm,
                layer_ok=layer_ok,
            )
        )
    return result


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:5.1f}% ({n}/{d})" if d else "    - (0/0)"


def format_eval(result: EvalResult, verbose: bool = False) -> str:
    rows = []
    by_layer: dict[str, list[CaseResult]] = defaultdict(list)
    for c in result.failing():
        by_layer[c.layer].append(c)
    header = (
        f"{'layer':<10} {'cases':>5}  {'top-1 + line':>18}  {'right layer':>18}  {'top-3':>18}  "
        f"{'silent':>16}"
    )
    rows.append(header)
    rows.append("-" * len(header))
    for layer in ("node", "harness", "engine", "model"):
        cs = by_layer.get(layer, [])
        if not cs:
            continue
        rows.append(
            f"{layer:<10} {len(cs):>5}  {_pct(sum(c.top1 for c in cs), len(cs)):>18}  "
            f"{_pct(sum(c.layer_ok for c in cs), len(cs)):>18}  "
            f"{_pct(sum(c.in_top3 for c in cs), len(cs)):>18}  "
            f"{_pct(sum(c.silent for c in cs), len(cs)):>16}"
        )
    cs = result.failing()
    rows.append(
        f"{'overall':<10} {len(cs):>5}  {_pct(sum(c.top1 for c in cs), len(cs)):>18}  "
        f"{_pct(sum(c.layer_ok for c in cs), len(cs)):>18}  "
        f"{_pct(sum(c.in_top3 for c in cs), len(cs)):>18}  "
        f"{_pct(sum(c.silent for c in cs), len(cs)):>16}"
    )
    hs = result.healthy()
    rows.append("")
    rows.append(
        f"healthy logs: {len(hs)}; false alarms (error hypothesis or unrecognized failure): "
        f"{_pct(sum(c.false_alarm for c in hs), len(hs))}"
    )
    misses = [c for c in cs if not c.top1] + [c for c in hs if c.false_alarm]
    if verbose and misses:
        rows.append("")
        rows.append("misses:")
        for c in misses:
            if c.expected is None:
                rows.append(f"  FALSE ALARM {c.case}: top={c.top}")
            else:
                rows.append(
                    f"  {c.case}: expected {c.expected}@{c.expected_line}, got {c.top} "
                    f"lines {c.top_lines[:5]} {c.note}"
                )
    return "\n".join(rows)
