"""`triage lint`: read launch configurations, report what the knowledge base knows will fail."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from triage.kb.records import Signature
from triage.preflight import knobs
from triage.preflight.model import Finding, Launch
from triage.preflight.parsers import ParseError, image_version, parse_file
from triage.preflight.rules import Context, evaluate


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "launches": [
                {
                    "file": la.file,
                    "name": la.name,
                    "line": la.line,
                    "kind": la.kind,
                    "engine": la.engine,
                    "image": la.image,
                    "items": len(la.items),
                }
                for la in self.launches
            ],
            "notes": self.notes,
            "errors": self.errors,
        }


def installed_version(engine: str) -> str | None:
    """The installed engine's version from package metadata (never imported)."""
    from importlib import metadata

    try:
        return metadata.version(engine)
    except metadata.PackageNotFoundError:
        return None


def _expand(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(
                sorted(
                    q
                    for q in p.rglob("*")
                    if q.is_file() and (not q.name.startswith(".") or q.name == ".env")
                )
            )
        else:
            out.append(p)
    units = {p.name for p in out if p.suffix in (".service", ".socket")}
    # A drop-in whose unit is also given is read with that unit (parse_file finds it).
    return [
        p
        for p in out
        if not (
            p.suffix == ".conf" and p.parent.name.endswith(".d") and p.parent.name[:-2] in units
        )
    ]


def lint_paths(
    paths: list[Path], signatures: list[Signature], engine_version: str | None = None
) -> LintResult:
    result = LintResult()
    bool_flags: set[str] = set()
    for rel in knobs.releases("vllm"):
        bool_flags |= rel.bool_flags
    for path in _expand(paths):
        try:
            launches = parse_file(path, bool_flags)
        except ParseError as exc:
            result.errors.append(str(exc))
            continue
        for launch in launches:
            result.launches.append(launch)
            result.notes.extend(f"{launch.file}: {n}" for n in launch.notes)
            version, source = engine_version, "--engine-version"
            if version is None:
                version, source = image_version(launch.image), f"image tag {launch.image}"
            if version is None and launch.engine:
                version, source = installed_version(launch.engine), "installed package"
            ctx = Context(
                engine_version=version if version else None,
                version_source=source if version else "",
            )
            result.findings.extend(evaluate(launch, signatures, ctx))
    seen: set[tuple[str, int, str, str]] = set()
    unique: list[Finding] = []
    for f in sorted(result.findings, key=Finding.sort_key):
        key = (f.file, f.line, f.signature, f.evidence)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    result.findings = unique
    return result


def render_text(result: LintResult) -> str:
    lines: list[str] = []
    for f in result.findings:
        lines.append(f"{f.file}:{f.line}: {f.severity}: [{f.signature}] {f.message}")
        lines.append(f"    evidence: {f.evidence}" + (f"   (in {f.launch})" if f.launch else ""))
        if f.fix:
            lines.append(f"    fix: {f.fix}")
        lines.extend(f"    note: {note}" for note in f.notes)
        if f.confidence != "high":
            lines.append(f"    confidence: {f.confidence}")
    lines.extend(f"error: {err}" for err in result.errors)
    lines.extend(f"note: {note}" for note in result.notes)
    n = len(result.findings)
    lines.append(f"{n} finding(s) in {len(result.launches)} launch(es)")
    return "\n".join(lines) + "\n"


def render_json(result: LintResult) -> str:
    return json.dumps(result.to_dict(), indent=2) + "\n"
