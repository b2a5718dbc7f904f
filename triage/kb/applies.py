"""`triage kb applies`: each signature's release ranges from the message catalog, and writing them.

`derive_all` asks the catalog (`Catalog.derive_applies`) which catalogued releases of each project
print every signature's message; `fill` writes `applies_to.versions` for a release-bound component
that has no hand-written range, by editing the YAML text (the file's own formatting and comments
are kept; the result is loaded back and checked), with a note that the range comes from the
catalog. A hand-written range is never replaced; where the catalog contradicts one, `kb lint`
says so (`check_catalog_applies`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from triage.kb.load import LoadResult
from triage.kb.schema import COMPONENTS, Signature, VersionRange
from triage.textutil import strip_ansi

NOTE_PREFIX = "From the message catalog (catalogued releases only; releases between them unknown):"
# Top-level keys that come after applies_to in a signature file: a new block goes before the first
_AFTER_APPLIES = ("differential", "fixes", "verify", "references", "provenance", "examples")


# Derivations the catalog gets wrong, never written: (signature id, component) -> why.
NOT_WRITTEN: dict[tuple[str, str], str] = {
    ("nvidia-pci-bar-invalid", "driver"): "the catalog misses the message after 550: 580's "
    "nv-pci.c splices a format macro (NvU64_fmtu) into the string, which the C scanner drops; "
    "git grep finds 'This PCI I/O region assigned to your NVIDIA device is invalid' in every "
    "driver branch from 550 to 595",
}


@dataclass
class Row:
    """One signature's derivation, per project, with what to write."""

    signature: str
    path: Path
    derived: list[Any]  # triage.catalog.Derived
    hand: dict[str, VersionRange]
    write: dict[str, Any] = field(default_factory=dict)  # component -> Derived to write

    def contradictions(self) -> list[str]:
        """Catalogued releases that print the message but fall outside a written range."""
        return [c for d in self.derived for c in contradicts(d, self.hand)]


def contradicts(derived: Any, versions: dict[str, VersionRange]) -> list[str]:
    """The printing releases a range of `versions` for the derivation's component excludes."""
    rng = versions.get(derived.component or "")
    if rng is None:
        return []
    from triage.kb.records import VersionRange as ScoredRange
    from triage.rank import version_in_range

    scored = ScoredRange(
        introduced=rng.introduced, fixed=rng.fixed, last_affected=rng.last_affected
    )
    out = [r for r in derived.printing if version_in_range(r, scored) is False]
    if not out:
        return []
    bounds = ", ".join(f"{k} {v}" for k, v in rng.model_dump().items() if v is not None)
    return [
        f"{derived.component} range ({bounds}) excludes catalogued {', '.join(out)}, which "
        f"print the message ({derived.note()})"
    ]


def derive_all(result: LoadResult, only: Sequence[str] = ()) -> list[Row] | None:
    """Every signature's derivation (those named in `only`, when given); None without a catalog."""
    from triage.catalog import component_ranges, open_catalog

    catalog = open_catalog()
    if catalog is None:
        return None
    rows = []
    for sig in result.signatures:
        if sig.kind == "knowledge" or not sig.examples.match or (only and sig.id not in only):
            continue
        derived = catalog.derive_applies(sig, [strip_ansi(x) for x in sig.examples.match])
        if not derived:
            continue
        hand = dict(sig.applies_to.versions)
        writable = {
            comp: d
            for comp, d in component_ranges(derived).items()
            if comp in COMPONENTS
            and comp not in hand
            and not d.gaps
            and (sig.id, comp) not in NOT_WRITTEN
        }
        rows.append(Row(sig.id, result.paths[sig.id], derived, hand, writable))
    return rows


def format_rows(rows: Sequence[Row]) -> list[str]:
    out = []
    for row in rows:
        for d in row.derived:
            state = ("release-bound" if d.bound else "printed by every catalogued release") + (
                ", with gaps" if d.gaps else ""
            )
            if d.uncovered:
                state += (
                    f", {len(d.uncovered)} decisive pattern(s) fire on no catalogued template of it"
                )
            line = f"{row.signature}: {d.project} {state}: {d.note()}"
            rng = d.range()
            if d.bound:
                proposed = _flow(rng) if rng else "(none)"
                line += f"; proposed {d.component or '(no component)'} {proposed}"
            hand = row.hand.get(d.component or "")
            if hand is not None:
                line += f"; hand-written {_flow(_fields(hand))}"
            if d.component and row.write.get(d.component) is d:
                line += " [write]"
            elif (row.signature, d.component or "") in NOT_WRITTEN:
                line += f" [not written: {NOT_WRITTEN[(row.signature, d.component or '')]}]"
            out.append(line)
        out.extend(f"{row.signature}: CONTRADICTS {c}" for c in row.contradictions())
    return out


def rows_json(rows: Sequence[Row]) -> str:
    return json.dumps(
        [
            {
                "signature": row.signature,
                "projects": [
                    {
                        "project": d.project,
                        "component": d.component,
                        "releases": list(d.releases),
                        "printing": list(d.printing),
                        "located": list(d.located),
                        "release_bound": d.bound,
                        "gaps": d.gaps,
                        "uncovered": list(d.uncovered),
                        "proposed": d.range() if d.bound else None,
                        "note": d.note(),
                        "hand_written": _fields(row.hand[d.component])
                        if d.component in row.hand
                        else None,
                        "write": bool(d.component) and row.write.get(d.component or "") is d,
                    }
                    for d in row.derived
                ],
                "contradictions": row.contradictions(),
            }
            for row in rows
        ],
        indent=2,
    )


def _fields(rng: VersionRange) -> dict[str, str]:
    return {k: v for k, v in rng.model_dump().items() if v is not None}


def _flow(rng: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}: "{v}"' for k, v in rng.items()) + "}"


def fill(rows: Sequence[Row]) -> list[Path]:
    """Write the writable ranges into their files; the files changed."""
    changed = []
    for row in rows:
        if not row.write:
            continue
        text = row.path.read_text(encoding="utf-8")
        new = text
        for comp, d in sorted(row.write.items()):
            new = add_range(new, comp, d.range(), d.note())
        check_edit(text, new, {c: d.range() for c, d in row.write.items()})
        if new != text:
            row.path.write_text(new, encoding="utf-8")
            changed.append(row.path)
    return changed


_TOP_KEY = re.compile(r"^([A-Za-z_][\w-]*):")


def add_range(text: str, component: str, rng: dict[str, str], note: str) -> str:
    """The file's text with `applies_to.versions.<component>` set to rng and the catalog's note
    added to `applies_to.note` (text edits only: every other line stays as it was)."""
    lines = text.splitlines(keepends=True)
    entry = f"    {component}: {_flow(rng)}\n"
    sentence = f"{NOTE_PREFIX} {note}."
    start = next((i for i, ln in enumerate(lines) if ln.rstrip("\n") == "applies_to:"), None)
    if start is None:
        at = next(
            (
                i
                for i, ln in enumerate(lines)
                if (m := _TOP_KEY.match(ln)) and m.group(1) in _AFTER_APPLIES
            ),
            len(lines),
        )
        block = ["applies_to:\n", "  versions:\n", entry, f"  note: {_quoted(sentence)}\n"]
        return "".join(lines[:at] + block + lines[at:])
    end = start + 1
    while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
        end += 1
    body = lines[start + 1 : end]
    versions = next((i for i, ln in enumerate(body) if ln.rstrip("\n") == "  versions:"), None)
    if versions is None:
        body.insert(0, "  versions:\n")
        body.insert(1, entry)
    else:
        last = versions + 1
        while last < len(body) and body[last].startswith("    "):
            last += 1
        body.insert(last, entry)
    body = _add_note(body, sentence)
    return "".join(lines[: start + 1] + body + lines[end:])


def _add_note(body: list[str], sentence: str) -> list[str]:
    at = next((i for i, ln in enumerate(body) if ln.startswith("  note:")), None)
    if at is None:
        return [*body, f"  note: {_quoted(sentence)}\n"]
    value = body[at][len("  note:") :].strip()
    if value.startswith('"') and value.endswith('"') and len(value) > 1:
        stop = "" if value[:-1].rstrip().endswith((".", ";", ":")) else "."
        body[at] = f'  note: {value[:-1]}{stop} {_escaped(sentence)}"\n'
        return body
    if value in (">", ">-", "|", "|-"):  # a block scalar: one more line of it
        last = at + 1
        while last < len(body) and body[last].startswith("    "):
            last += 1
        body.insert(last, f"    {sentence}\n")
        return body
    raise ValueError(f"applies_to.note of an unexpected form: {value[:40]!r}")


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _quoted(text: str) -> str:
    return f'"{_escaped(text)}"'


def check_edit(before: str, after: str, ranges: dict[str, dict[str, str]]) -> None:
    """The edited file parses, validates, has the ranges written and nothing else changed outside
    applies_to (a failed check raises: nothing is written)."""
    old = yaml.safe_load(before)
    new = yaml.safe_load(after)
    Signature.model_validate(new)
    for comp, rng in ranges.items():
        if new["applies_to"]["versions"].get(comp) != rng:
            raise ValueError(f"{new.get('id')}: {comp} range not written as {rng}")
    old_applies = old.pop("applies_to", {}) or {}
    new_applies = new.pop("applies_to")
    if old != new:
        raise ValueError(f"{new.get('id')}: the edit changed more than applies_to")
    for key, value in old_applies.items():
        if key == "versions":
            if any(new_applies["versions"].get(k) != v for k, v in value.items()):
                raise ValueError(f"{new.get('id')}: the edit changed a hand-written range")
        elif key == "note":
            if not str(new_applies.get("note", "")).startswith(str(value).rstrip()):
                raise ValueError(f"{new.get('id')}: the edit changed the note")
        elif new_applies.get(key) != value:
            raise ValueError(f"{new.get('id')}: the edit changed applies_to.{key}")
