"""Measure how many of the lines no curated signature explains the message catalog locates.

Issue 18's acceptance counts, over the corpus and a fresh round of real excerpts, the salient
lines no curated signature explains: each is either located (a hypothesis with basis "located")
or stays in `unrecognized`. This script runs the engine on every case under the given roots
(`<layer>/<slug>.log`, the corpus format; healthy logs included: they should add nothing) and
prints located / (located + unrecognized), per root and in all, with every line and where it was
located, so each miss and each location can be read by hand.

Usage: python scripts/measure_located.py corpus audits/round-9 [--json] [--misses]
       python scripts/measure_located.py corpus --sample 50 --seed 18   (a seeded hand-check draw)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from triage.api import Engine, load_kb

Row = dict[str, Any]


def measure(roots: list[Path]) -> list[Row]:
    """One row per salient line no curated signature explains: located (with where) or not."""
    engine = Engine(load_kb())
    rows: list[Row] = []
    for root in roots:
        for log in sorted(root.rglob("*.log")):
            report = engine.run([str(log)])
            case = str(log)
            for hyp in report.hypotheses:
                if getattr(hyp, "basis", "") != "located" or hyp.source is None:
                    continue
                src = hyp.source
                rows.extend(
                    {
                        "root": str(root),
                        "case": case,
                        "line": ev.line,
                        "text": ev.text.strip()[:300],
                        "located": True,
                        "severity": hyp.severity,
                        "layer": hyp.layer,
                        "project": src.project,
                        "release": src.release,
                        "file": src.file,
                        "function": src.function,
                        "kind": src.kind,
                        "src_line": src.line,
                        "template": src.template,
                        "url": src.url,
                    }
                    for ev in hyp.evidence
                )
            rows.extend(
                {
                    "root": str(root),
                    "case": case,
                    "line": un.line,
                    "text": un.text.strip()[:300],
                    "located": False,
                }
                for un in report.unrecognized
            )
    return rows


def _share(rows: list[Row]) -> str:
    located = sum(1 for r in rows if r["located"])
    return f"{located}/{len(rows)} located ({100.0 * located / len(rows) if rows else 0.0:.1f}%)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", type=Path, nargs="+")
    parser.add_argument("--json", action="store_true", help="every row as JSON")
    parser.add_argument("--misses", action="store_true", help="list only the lines not located")
    parser.add_argument("--sample", type=int, default=0, help="draw N located lines (hand check)")
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    rows = measure(args.roots)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    if args.sample:
        located = [r for r in rows if r["located"]]
        pick = random.Random(args.seed).sample(located, min(args.sample, len(located)))
        for i, r in enumerate(pick, 1):
            print(
                f"{i}\t{r['case']}:{r['line']}\t{r['text']}\n\t{r['project']} {r['release']} "
                f"{r['file']}:{r['src_line']} {r['function']} [{r['kind']}]\n\t{r['template']}"
            )
        return 0
    for r in rows:
        if args.misses and r["located"]:
            continue
        where = (
            f"{r['project']} {r['release']} {r['file']}:{r['src_line']} {r['function']} "
            f"[{r['kind']}, {r['severity']}]"
            if r["located"]
            else "NOT LOCATED"
        )
        print(f"{r['case']}:{r['line']}\n    {r['text'][:200]}\n    -> {where}")
    for root in args.roots:
        print(f"{root}: {_share([r for r in rows if r['root'] == str(root)])}")
    if len(args.roots) > 1:
        print(f"all: {_share(rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
