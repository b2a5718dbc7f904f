"""Score an audit round of fresh real excerpts (docs/audits.md, "Method"): for each case under a
directory (`<layer>/<slug>.log` + `.expected.yaml`, the corpus format plus `expect.layer`), run the
engine and count

- top-1 with the line: the top hypothesis is the expected signature (when one exists) and cites
  the expected line among its evidence;
- top cites the line: the top hypothesis, whatever its signature or basis, cites the expected line
  (the answer a reader needs when the knowledge base has no signature for the class);
- right layer: the top hypothesis's layer is the expected layer;
- silent: no hypothesis and no unrecognized line (the run would exit 0).

Usage: python scripts/score_round.py audits/round-9 [--verbose] [--json]
       [--relabel audits/round-10/relabel.yaml] [--exclude-marked]

`--relabel` reads a blind relabel of the round (a list of {case, now, line}: the signature that
describes each case's class in a later knowledge base, decided from ids, titles and summaries only)
and scores against it; `--exclude-marked` leaves out the cases the round's README marks with `*`
(sources that other work took up after collection, so no longer blind).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from triage.api import Engine, load_kb
from triage.evaluate import corpus_cases


def score(
    root: Path, relabel: dict[str, dict[str, Any]] | None = None, exclude: set[str] | None = None
) -> list[dict[str, object]]:
    kb = load_kb()
    aliases = {a: s.id for s in kb.signatures for a in s.aliases}
    engine = Engine(kb)
    rows: list[dict[str, object]] = []
    for log, _exp, data in corpus_cases(root):
        case = str(log.relative_to(root).with_suffix(""))
        if exclude and log.stem in exclude:
            continue
        expect = dict(data.get("expect") or {})
        if relabel and case in relabel:
            expect["top"] = relabel[case].get("now")
            expect["line"] = relabel[case].get("line") or expect.get("line")
        report = engine.run([str(log)])
        top = report.hypotheses[0] if report.hypotheses else None
        line = expect.get("line")
        cites = bool(top) and any(e.line == line for e in top.evidence)  # type: ignore[union-attr]
        name = aliases.get(top.signature, top.signature) if top else None
        rows.append(
            {
                "case": str(log.relative_to(root)),
                "expected": expect.get("top"),
                "line": line,
                "layer": expect.get("layer") or log.parent.name,
                "top": name,
                "top_layer": top.layer if top else None,
                "basis": getattr(top, "basis", "decisive") if top else None,
                "top1_line": bool(top) and name == expect.get("top") and cites,
                "cites_line": cites,
                "right_layer": bool(top) and top.layer == (expect.get("layer") or log.parent.name),  # type: ignore[union-attr]
                "silent": not report.hypotheses and not report.unrecognized,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--relabel", type=Path, help="a blind relabel file (see the docstring)")
    parser.add_argument("--exclude-marked", action="store_true", help="leave out the `*` cases")
    opts = parser.parse_args()
    relabel = None
    if opts.relabel:
        relabel = {str(e["case"]): e for e in yaml.safe_load(opts.relabel.read_text()) or []}
    exclude = None
    if opts.exclude_marked:
        readme = (opts.root / "README.md").read_text()
        exclude = set(re.findall(r"\| \w+ \| ([\w.+-]+)\* \|", readme))
    rows = score(opts.root, relabel, exclude)
    if opts.json:
        json.dump(rows, sys.stdout, indent=1)
        return
    n = len(rows)
    if not n:
        sys.exit(f"{opts.root}: no cases")

    def pct(key: str) -> str:
        k = sum(1 for r in rows if r[key])
        return f"{100.0 * k / n:5.1f}% ({k}/{n})"

    for layer in ("node", "harness", "engine", "model"):
        sub = [r for r in rows if r["layer"] == layer]
        if sub:
            k = sum(1 for r in sub if r["top1_line"])
            print(f"{layer:<8} {len(sub):>3} cases, top-1 with the line {k}")
    print(f"top-1 with the line: {pct('top1_line')}")
    print(f"top cites the line:  {pct('cites_line')}")
    print(f"right layer:         {pct('right_layer')}")
    print(f"silent:              {pct('silent')}")
    if opts.verbose:
        for r in rows:
            if not r["top1_line"]:
                print(
                    f"  MISS {r['case']}: expected {r['expected']}@{r['line']} [{r['layer']}], "
                    f"got {r['top']} [{r['top_layer']}, {r['basis']}] cites={r['cites_line']}"
                )


if __name__ == "__main__":
    main()
