#!/usr/bin/env python3
"""Regenerate triage/data/engine_knobs.json from the engines' own source files.

For every vLLM release given, it reads (never imports, never executes):

- ``vllm/envs.py``: the keys of the ``environment_variables`` dict (the env vars that release reads);
- the argument parser: every ``--flag`` literal passed to ``add_argument(...)`` in
  ``vllm/engine/arg_utils.py`` and every ``cli_args.py`` / ``serve.py`` / ``args.py`` under
  ``vllm/entrypoints`` (the parser moved between releases), plus the dataclass fields of ``EngineArgs`` /
  ``AsyncEngineArgs`` / ``*FrontendArgs`` (vLLM builds most flags from those fields);
- ``AttentionBackendEnum`` member names (the valid ``--attention-backend`` values);
- the release and commit id recorded in ``vllm/_version.py`` (or ``vllm/commit_id.py``).

Sources come from one of:

    --wheel PATH            a vLLM wheel (a zip; only the files above are read from it)
    --src DIR               a directory with one sub-directory per release, each holding a ``vllm/``
                            tree (e.g. DIR/0.31.0/vllm/envs.py); the release is the sub-directory name
    --download VERSION      fetch the wheel with ``pip download vllm==VERSION --no-deps`` (the
                            ordinary package client) into a temporary directory, then as --wheel

The output merges into the existing JSON (releases not given are kept), so one release can be
added at a time:

    python scripts/extract_engine_knobs.py --download 0.33.0
    python scripts/extract_engine_knobs.py --wheel /tmp/vllm-0.31.0-*.whl --wheel ...
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "triage" / "data" / "engine_knobs.json"

ENV_FILE = "vllm/envs.py"
# The argument parser moved between releases (entrypoints/openai -> entrypoints/launchers, ...):
# every file with one of these names under vllm/engine or vllm/entrypoints is read.
PARSER_FILE = re.compile(r"^vllm/(?:engine|entrypoints)/(?:[\w/]+/)?(?:arg_utils|cli_args|serve|args)\.py$")
BACKEND_FILES = (
    "vllm/v1/attention/backends/registry.py",
    "vllm/attention/backends/registry.py",
    "vllm/platforms/interface.py",
)
VERSION_FILES = ("vllm/_version.py", "vllm/commit_id.py", "vllm/version.py")
ARG_CLASSES = re.compile(r"^(?:Async)?EngineArgs$|FrontendArgs$")
BACKEND_ENUMS = ("AttentionBackendEnum", "_Backend")

Reader = Callable[[str], str | None]
Lister = Callable[[], list[str]]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def env_names(source: str) -> list[str]:
    """Keys of the module-level ``environment_variables`` dict literal."""
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if (isinstance(target, ast.Name) and target.id == "environment_variables"
                and isinstance(value, ast.Dict)):
            for key in value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    names.add(key.value)
    return sorted(names)


def _field_is_bool(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return bool(re.fullmatch(r"(?:bool|Optional\[bool\]|bool \| None|None \| bool)", text))


def parser_flags(source: str) -> tuple[set[str], set[str]]:
    """(flags, boolean flags) from add_argument literals and *Args dataclass fields."""
    tree = ast.parse(source)
    flags: set[str] = set()
    bools: set[str] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            for arg in node.args:
                if (isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                        and arg.value.startswith("--")):
                    flags.add(arg.value)
        elif isinstance(node, ast.ClassDef) and ARG_CLASSES.search(node.name):
            for item in node.body:
                if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                        and not item.target.id.startswith("_")
                        and "ClassVar" not in ast.unparse(item.annotation)):
                    flag = "--" + item.target.id.replace("_", "-")
                    flags.add(flag)
                    if _field_is_bool(item.annotation):
                        bools.add(flag)
    return flags, bools


def backend_names(source: str) -> list[str]:
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in BACKEND_ENUMS:
            for item in node.body:
                if isinstance(item, ast.Assign):
                    for tgt in item.targets:
                        if isinstance(tgt, ast.Name) and tgt.id.isupper():
                            names.add(tgt.id)
    return sorted(names)


def release_and_commit(read: Reader) -> tuple[str | None, str | None]:
    version = commit = None
    for name in VERSION_FILES:
        text = read(name)
        if not text:
            continue
        if version is None:
            m = re.search(r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text)
            version = m.group(1) if m else None
        if commit is None:
            m = re.search(r"__commit(?:_id)?__\s*=\s*(?:commit_id\s*=\s*)?['\"]g?([0-9a-f]{7,40})['\"]",
                          text)
            commit = m.group(1) if m else None
    return version, commit


def extract(read: Reader, names: Lister, release: str | None, origin: str) -> tuple[str, dict[str, object]]:
    """One release's knobs from a file reader (path inside the source tree -> text or None)."""
    found_version, commit = release_and_commit(read)
    release = release or found_version
    if not release:
        raise SystemExit(f"{origin}: cannot tell the release (no vllm/_version.py)")
    env_src = read(ENV_FILE)
    if env_src is None:
        raise SystemExit(f"{origin}: no {ENV_FILE}")
    sources = {ENV_FILE: _sha(env_src)}
    flags: set[str] = set()
    bools: set[str] = set()
    for name in sorted(n for n in names() if PARSER_FILE.match(n) and "/benchmark" not in n):
        text = read(name)
        if text is None:
            continue
        sources[name] = _sha(text)
        f, b = parser_flags(text)
        flags |= f
        bools |= b
    backends: list[str] = []
    for name in BACKEND_FILES:
        text = read(name)
        if text is None:
            continue
        backends = backend_names(text)
        if backends:
            sources[name] = _sha(text)
            break
    return release, {
        "commit": commit,
        "origin": origin,
        "sources": sources,
        "env": env_names(env_src),
        "flags": sorted(flags),
        "bool_flags": sorted(bools),
        "attention_backends": backends,
    }


def from_wheel(path: Path) -> tuple[str, dict[str, object]]:
    with zipfile.ZipFile(path) as zf:
        members = set(zf.namelist())

        def read(name: str) -> str | None:
            return zf.read(name).decode("utf-8") if name in members else None

        return extract(read, lambda: sorted(members), None, f"wheel {path.name}")


def from_tree(path: Path) -> tuple[str, dict[str, object]]:
    def read(name: str) -> str | None:
        p = path / name
        return p.read_text(encoding="utf-8") if p.is_file() else None

    def names() -> list[str]:
        return sorted(p.relative_to(path).as_posix() for p in (path / "vllm").rglob("*.py"))

    return extract(read, names, path.name, f"source tree {path.name}")


def download(version: str, into: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps",
                    "--only-binary", ":all:", "-d", str(into)], check=True)
    wheels = sorted(into.glob(f"vllm-{version}*.whl"))
    if not wheels:
        raise SystemExit(f"pip download produced no wheel for vllm {version}")
    return wheels[0]


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:4])


def merge(out: Path, releases: Iterable[tuple[str, dict[str, object]]]) -> dict[str, object]:
    data: dict[str, object] = {}
    if out.exists():
        data = json.loads(out.read_text(encoding="utf-8"))
    engines = data.setdefault("engines", {})
    assert isinstance(engines, dict)
    vllm = engines.setdefault("vllm", {"releases": {}})
    rel = vllm["releases"]
    for name, knobs in releases:
        rel[name] = knobs
    vllm["releases"] = {k: rel[k] for k in sorted(rel, key=_version_key)}
    data["generated_by"] = "scripts/extract_engine_knobs.py"
    data["note"] = ("Extracted from each release's own source files (see 'sources' and 'commit'); "
                    "regenerate with the script, never edit by hand.")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--wheel", action="append", default=[], type=Path)
    ap.add_argument("--src", type=Path, help="directory of per-release source trees")
    ap.add_argument("--download", action="append", default=[], metavar="VERSION")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    found: list[tuple[str, dict[str, object]]] = [from_wheel(w) for w in args.wheel]
    if args.src:
        found.extend(from_tree(sub) for sub in sorted(args.src.iterdir())
                     if (sub / ENV_FILE).is_file())
    if args.download:
        with tempfile.TemporaryDirectory() as tmp:
            found.extend(from_wheel(download(v, Path(tmp))) for v in args.download)
    if not found:
        ap.error("give --wheel, --src or --download")
    data = merge(args.out, found)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    for name, knobs in found:
        print(f"vllm {name} (commit {knobs['commit']}): {len(knobs['env'])} env vars, "  # type: ignore[arg-type]
              f"{len(knobs['flags'])} flags, {len(knobs['attention_backends'])} attention backends")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
