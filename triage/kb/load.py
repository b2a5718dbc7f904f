"""Discover and parse signature YAML files into validated `Signature`s, collecting every error.

YAML is parsed with a safe loader that refuses aliases and anchors (billion-laughs) and
duplicate keys; each error names the file and the field. Every regex must compile and pass the
backtracking check `kb lint` applies (`triage.kb.redos`): a signature that fails either is not
loaded, on every path (`kb build`, `--signatures DIR`, the shipped KB), and the error names the
file, the field and the pattern.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from triage.kb.paths import LoadError, require_signature_dir, signature_files
from triage.kb.schema import Signature

MAX_SIGNATURE_BYTES = 256 * 1024


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects aliases and duplicate mapping keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases are not allowed in signatures", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "found an unhashable mapping key", key_node.start_mark
                ) from None
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str) -> Any:
    """Parse YAML text with the strict loader."""
    return yaml.load(text, Loader=_StrictLoader)


@dataclass
class LoadResult:
    signatures: list[Signature] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    paths: dict[str, Path] = field(default_factory=dict)


def load_signature_file(path: Path) -> tuple[Signature | None, list[LoadError]]:
    shown = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, [LoadError(shown, "", f"cannot read: {exc.strerror}")]
    if len(raw) > MAX_SIGNATURE_BYTES:
        return None, [LoadError(shown, "", f"file larger than {MAX_SIGNATURE_BYTES} bytes")]
    try:
        data = parse_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, [LoadError(shown, "", "not UTF-8")]
    except yaml.YAMLError as exc:
        return None, [LoadError(shown, "", f"invalid YAML: {exc}".replace("\n", " "))]
    except RecursionError:
        return None, [LoadError(shown, "", "YAML nested too deeply")]
    if not isinstance(data, dict):
        return None, [LoadError(shown, "", "top level must be a mapping")]
    try:
        sig = Signature.model_validate(data)
    except ValidationError as exc:
        errors = [
            LoadError(shown, ".".join(str(p) for p in err["loc"]), err["msg"])
            for err in exc.errors()
        ]
        return None, errors
    bad_patterns = pattern_errors(sig, shown)
    if bad_patterns:
        return None, bad_patterns
    problems: list[LoadError] = []
    if sig.id != path.stem:
        problems.append(LoadError(shown, "id", f"id {sig.id!r} differs from file stem"))
    if sig.layer != path.parent.name:
        problems.append(LoadError(shown, "layer", f"layer {sig.layer!r} differs from directory"))
    return sig, problems


def _patterns(sig: Signature) -> list[tuple[str, str]]:
    """(field, regex) of every pattern of a signature, fields named as `kb lint` names them."""
    out = [(f"match[{i}].regex", p.regex) for i, p in enumerate(sig.match)]
    out += [(f"not[{i}].regex", p.regex) for i, p in enumerate(sig.not_)]
    out += [
        (f"differential[{i}].evidence[{j}]", ev)
        for i, d in enumerate(sig.differential)
        for j, ev in enumerate(d.evidence)
    ]
    return out


def pattern_errors(sig: Signature, shown: str) -> list[LoadError]:
    """A regex that does not compile, or that backtracks catastrophically (the shapes `kb lint`
    rejects), makes the whole signature unloadable: one error per bad pattern."""
    from triage.kb.redos import redos_issues
    from triage.regexes import compile_linear

    errors: list[LoadError] = []
    for where, pattern in _patterns(sig):
        try:
            compile_linear(pattern)  # what confirms it in a run (cached for that run)
        except Exception as exc:  # regex.error, or OverflowError on a huge repeat count
            errors.append(LoadError(shown, where, f"invalid regex {pattern!r}: {exc}"))
            continue
        errors.extend(
            LoadError(shown, where, f"regex {pattern!r} rejected: {issue}")
            for issue in redos_issues(pattern)
        )
    return errors


def load_signatures(root: Path | None = None) -> LoadResult:
    """Load every signature under root; errors are collected, not raised."""
    root = require_signature_dir(root)
    result = LoadResult()
    seen: dict[str, str] = {}
    for path in signature_files(root):
        sig, errors = load_signature_file(path)
        result.errors.extend(errors)
        if sig is None:
            continue
        for name in (sig.id, *sig.aliases):
            if name in seen:
                result.errors.append(
                    LoadError(str(path), "id", f"{name!r} already used by {seen[name]}")
                )
            seen[name] = str(path)
        result.signatures.append(sig)
        result.paths[sig.id] = path
    known = {s.id for s in result.signatures}
    for sig in result.signatures:
        for ref in (*sig.explains, *sig.related, *([sig.variant_of] if sig.variant_of else [])):
            if ref not in known:
                result.errors.append(
                    LoadError(
                        str(result.paths[sig.id]),
                        "explains/related/variant_of",
                        f"unknown id {ref!r}",
                    )
                )
    return result


def unloaded(errors: list[LoadError], loaded: set[str]) -> list[LoadError]:
    """The errors of files that did not load at all (their signature is missing from the KB),
    as against problems of a signature that still loaded (an unknown `explains` id)."""
    return [e for e in errors if e.path not in loaded]


def unloaded_errors(root: Path, kb_path: Path | None = None) -> list[LoadError]:
    """The errors of the signature files of root that did not load: read from its compiled
    knowledge base when that is current (a query, no YAML parsed), else by loading the YAML."""
    import contextlib

    from triage.kb import store

    conn = store.open_current(root, kb_path or store.default_db_path(root))
    if conn is not None:
        with contextlib.closing(conn):
            loaded = {row[0] for row in conn.execute("SELECT path FROM signatures")}
            return unloaded(store.read_errors(conn), loaded)
    result = load_signatures(root)
    return unloaded(result.errors, {str(p) for p in result.paths.values()})
