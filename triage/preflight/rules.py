"""The lint rule engine: the knowledge base's `config:` checks plus version-aware knob knowledge.

A KB check fires on a launch when its target (env var, flag or setting) is present, its `value`
regex (if any) is found in the value, and every name in `requires` is present too. A `requires`
entry may also be written `NAME=REGEX` (the named item's value must match). Setting names are
compared case-insensitively. Findings from extracted knowledge are attributed to the signatures
that describe the same failure in a log (`env-var-not-read`, `vllm-unrecognized-arguments`,
`attention-backend-invalid`), so lint and triage share one truth.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from triage.kb.records import ConfigCheck, Signature
from triage.preflight import knobs
from triage.preflight.model import Finding, Item, Launch

SIG_ENV_UNKNOWN = "env-var-not-read"
SIG_FLAG_UNKNOWN = "vllm-unrecognized-arguments"
SIG_BACKEND_UNKNOWN = "attention-backend-invalid"
SIG_ENV_NOT_PASSED = "container-env-not-passed"


@dataclass
class Context:
    """What the rules know about the launch besides its items."""

    engine_version: str | None = None
    version_source: str = ""


def _lookup(launch: Launch, name: str) -> Item | None:
    if name.startswith("-"):
        from triage.preflight.parsers import normalize_flag

        return launch.flags().get(normalize_flag(name))
    env = launch.env()
    if name in env:
        return env[name]
    return launch.settings().get(name.lower())


def _requirement_met(launch: Launch, req: str) -> bool:
    name, sep, pattern = req.partition("=")
    item = _lookup(launch, name.strip())
    if item is None:
        return False
    return not sep or re.search(pattern, item.value) is not None


def _target(check: ConfigCheck) -> str:
    return check.env or check.flag or check.setting or ""


def _applicable(sig: Signature, engine: str | None, version: str | None) -> str | None:
    """A note when the signature's version range excludes the launch's engine version."""
    if not engine or not version:
        return None
    rng = sig.applies_to.versions.get(engine)
    if rng is None:
        return None
    try:
        v = Version(version)
        if rng.introduced and v < Version(rng.introduced):
            return f"{sig.id} applies from {engine} {rng.introduced}; this launch uses {version}"
        if rng.fixed and v >= Version(rng.fixed):
            return f"{sig.id} was fixed in {engine} {rng.fixed}; this launch uses {version}"
    except InvalidVersion:
        return None
    return None


def kb_findings(launch: Launch, signatures: Iterable[Signature], ctx: Context) -> list[Finding]:
    out: list[Finding] = []
    for sig in signatures:
        for check in sig.config:
            item = _lookup(launch, _target(check))
            if item is None:
                continue
            if check.value is not None and re.search(check.value, item.value) is None:
                continue
            if not all(_requirement_met(launch, r) for r in check.requires):
                continue
            fix = sig.fixes[0].do if sig.fixes else None
            finding = Finding(
                file=item.file,
                line=item.line,
                signature=sig.id,
                layer=sig.layer,
                severity=sig.severity if sig.severity != "info" else "warning",
                message=check.message,
                evidence=item.shown(),
                fix=fix,
                rule="kb-config",
                launch=launch.name,
            )
            if check.requires:
                finding.notes.append("together with " + ", ".join(check.requires))
            if item.note:
                finding.notes.append(item.note)
            outside = _applicable(sig, launch.engine, ctx.engine_version)
            if outside:
                finding.confidence = "lowered"
                finding.notes.append(outside)
            out.append(finding)
    return out


def knob_findings(launch: Launch, ctx: Context) -> list[Finding]:
    """Env vars the release does not read, flags it does not accept, unknown backend names."""
    engine = launch.engine or (
        "vllm" if any(i.name.startswith("VLLM_") for i in launch.items if i.kind == "env") else None
    )
    if engine != "vllm":
        return []
    resolved = knobs.resolve(engine, ctx.engine_version, ctx.version_source or "given")
    if resolved is None:
        return []
    rel = resolved.release
    out: list[Finding] = []
    confidence = "high" if resolved.exact else "lowered"
    base_notes = [] if resolved.exact else [resolved.why]
    for item in [*launch.items, *launch.shell_only]:
        if item.kind == "env" and item.name.startswith("VLLM_") and item.name not in rel.env:
            hist = knobs.history(engine, "env", item.name, rel)
            repl = knobs.env_replacement(item.name, rel)
            msg = f"{item.name} is not read by {rel.label()} (not in its vllm/envs.py)"
            if hist:
                msg += f"; {hist}"
            fix = None
            if repl and repl.startswith("--"):
                msg += f"; replaced by the flag {repl}"
                fix = f"Remove {item.name} and pass {repl} instead"
            elif repl:
                msg += f"; did you mean {repl}?"
                fix = f"Rename it to {repl}"
            out.append(
                Finding(
                    item.file,
                    item.line,
                    SIG_ENV_UNKNOWN,
                    "engine",
                    "warning",
                    msg,
                    item.shown(),
                    fix,
                    "env-unknown",
                    launch.name,
                    confidence,
                    list(base_notes),
                )
            )
        elif (
            item.kind == "flag" and launch.engine == "vllm" and not knobs.flag_known(item.name, rel)
        ):
            hist = knobs.history(engine, "flag", item.name, rel)
            near = knobs.closest(item.name, rel.flags)
            msg = f"{item.name} is not a flag of {rel.label()}"
            if hist:
                msg += f"; {hist}"
            fix = f"Did you mean {near}?" if near else "Remove it (vLLM exits on unknown arguments)"
            out.append(
                Finding(
                    item.file,
                    item.line,
                    SIG_FLAG_UNKNOWN,
                    "engine",
                    "error",
                    msg,
                    item.shown(),
                    fix,
                    "flag-unknown",
                    launch.name,
                    confidence,
                    list(base_notes),
                )
            )
        elif (
            item.kind == "flag"
            and item.name == "--attention-backend"
            and rel.attention_backends
            and item.value
            and not item.value.startswith("$")
            and item.value.upper() not in rel.attention_backends
        ):
            near = knobs.closest(item.value.upper(), rel.attention_backends, 70.0)
            msg = f"attention backend {item.value} does not exist in {rel.label()}"
            fix = f"Did you mean {near}?" if near else "Remove the flag and let vLLM choose"
            out.append(
                Finding(
                    item.file,
                    item.line,
                    SIG_BACKEND_UNKNOWN,
                    "engine",
                    "error",
                    msg,
                    item.shown(),
                    fix,
                    "backend-unknown",
                    launch.name,
                    confidence,
                    list(base_notes),
                )
            )
    return out


def shell_only_findings(launch: Launch) -> list[Finding]:
    """A variable the script exports for a container launch without passing it in (`-e NAME`):
    the engine never reads it, whatever its release knows (seed row E7: an A/B comparison of
    kernels would compare the default twice). The release check of `knob_findings` still runs
    on it, so a name the image's release does not read is reported too."""
    return [
        Finding(
            item.file,
            item.line,
            SIG_ENV_NOT_PASSED,
            "harness",
            "warning",
            f"{item.name} is exported in the script's shell but not passed into the container "
            f"(no -e {item.name} on the docker run at line {launch.line}): the engine in the "
            "container never sees it",
            item.shown(),
            f"Pass it with -e {item.name}={item.value} (or -e {item.name}) on the docker run, "
            "or drop the export",
            "env-not-passed",
            launch.name,
        )
        for item in launch.shell_only
    ]


def evaluate(launch: Launch, signatures: Iterable[Signature], ctx: Context) -> list[Finding]:
    """Every finding for one launch; a knob finding on an item a KB check already names is merged
    into that finding (the KB message carries the fix, the knob data the version evidence)."""
    kb = kb_findings(launch, signatures, ctx)
    merged: list[Finding] = list(kb)
    taken = {(f.file, f.line, f.evidence.split("=", 1)[0].split(" ", 1)[0]): f for f in kb}
    for f in knob_findings(launch, ctx):
        key = (f.file, f.line, f.evidence.split("=", 1)[0].split(" ", 1)[0])
        if key in taken:
            taken[key].notes.append(f.message)
            continue
        merged.append(f)
    merged.extend(shell_only_findings(launch))
    if ctx.engine_version is None and launch.engine:
        for f in merged:
            if f.rule == "kb-config" and not f.notes:
                f.notes.append("engine version unknown (give --engine-version)")
    return sorted(merged, key=Finding.sort_key)
