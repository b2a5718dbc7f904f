"""Version-aware env var and flag knowledge, extracted from the engines' own source.

The data (`triage/data/engine_knobs.json`) is written by `scripts/extract_engine_knobs.py`; this
module only reads it: which env vars and flags a release reads, in which releases a name existed,
and the closest valid name (rapidfuzz) for a misspelling.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version
from rapidfuzz import fuzz, process

DATA = Path(__file__).resolve().parent.parent / "data" / "engine_knobs.json"


@dataclass(frozen=True)
class Release:
    engine: str
    version: str
    commit: str | None
    env: frozenset[str]
    flags: frozenset[str]
    bool_flags: frozenset[str]
    attention_backends: frozenset[str]

    def label(self) -> str:
        return f"{self.engine} {self.version}" + (f" (commit {self.commit})" if self.commit else "")


@dataclass(frozen=True)
class Resolved:
    """The release whose lists a launch is checked against, and how sure that choice is."""

    release: Release
    exact: bool
    why: str  # e.g. "--engine-version 0.31.0", "image tag", "unknown version: newest data"


def _vkey(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


@lru_cache(maxsize=4)
def load(path: str | None = None) -> dict[str, list[Release]]:
    raw: dict[str, Any] = json.loads(Path(path or DATA).read_text(encoding="utf-8"))
    out: dict[str, list[Release]] = {}
    for engine, body in raw.get("engines", {}).items():
        releases = [
            Release(
                engine,
                version,
                k.get("commit"),
                frozenset(k.get("env", [])),
                frozenset(k.get("flags", [])),
                frozenset(k.get("bool_flags", [])),
                frozenset(k.get("attention_backends", [])),
            )
            for version, k in body.get("releases", {}).items()
        ]
        out[engine] = sorted(releases, key=lambda r: _vkey(r.version))
    return out


def releases(engine: str = "vllm") -> list[Release]:
    return load().get(engine, [])


def resolve(engine: str, version: str | None, source: str) -> Resolved | None:
    """The newest release at or below `version`; the newest of all when the version is unknown."""
    known = releases(engine)
    if not known:
        return None
    if version is None:
        return Resolved(
            known[-1],
            False,
            f"engine version unknown: checked against {engine} "
            f"{known[-1].version}, the newest release in the data",
        )
    want = _vkey(version)
    for rel in known:
        if _vkey(rel.version) == want:
            return Resolved(rel, True, f"{engine} {version} ({source})")
    below = [r for r in known if _vkey(r.version) <= want]
    if below:
        rel = below[-1]
        return Resolved(
            rel,
            False,
            f"{engine} {version} ({source}) is not in the data: checked "
            f"against {rel.version}, the nearest release below it",
        )
    return Resolved(
        known[0],
        False,
        f"{engine} {version} ({source}) is older than the data: checked against {known[0].version}",
    )


def releases_with(engine: str, kind: str, name: str) -> list[str]:
    return [r.version for r in releases(engine) if name in (r.env if kind == "env" else r.flags)]


def history(engine: str, kind: str, name: str, current: Release) -> str | None:
    """'read by 0.21.0 .. 0.21.0; gone from 0.25.0' for a name the current release lacks."""
    having = releases_with(engine, kind, name)
    if not having:
        return None
    versions = [r.version for r in releases(engine)]
    last = having[-1]
    after = [v for v in versions if _vkey(v) > _vkey(last)]
    what = "read by" if kind == "env" else "accepted by"
    text = f"{what} {engine} {having[0]}" + (f"..{last}" if last != having[0] else "")
    if after and _vkey(current.version) > _vkey(last):
        text += f"; gone from {after[0]} on"
    elif _vkey(current.version) < _vkey(having[0]):
        text += f"; added after {current.version}"
    return text


def closest(name: str, choices: frozenset[str], cutoff: float = 80.0) -> str | None:
    if not choices:
        return None
    found = process.extractOne(name, choices, scorer=fuzz.ratio, score_cutoff=cutoff)
    return str(found[0]) if found else None


def env_replacement(name: str, rel: Release) -> str | None:
    """The flag or env var that took over a VLLM_* variable the release no longer reads.

    Derived from the release's own lists: VLLM_DISABLE_CUSTOM_ALL_REDUCE ->
    --disable-custom-all-reduce (the same words as a flag), VLLM_MM_HASHER_ALGORITHM ->
    --mm-hasher-algorithm; else the closest env var of the release.
    """
    words = re.sub(r"^VLLM_", "", name).lower().replace("_", "-")
    candidates = [
        f"--{words}",
        "--" + re.sub(r"^use-", "", words),
        "--" + re.sub(r"^(?:use-|enable-)", "enable-", words),
    ]
    for flag in candidates:
        if flag in rel.flags:
            return flag
    near = closest(name, rel.env, 88.0)
    return near


def flag_known(flag: str, rel: Release) -> bool:
    base = flag.split(".", 1)[0] if "." in flag else flag
    return base in rel.flags or (base.startswith("--no-") and ("--" + base[5:]) in rel.flags)
