"""Check the knowledge base: one function per rule, each returning `Issue`s that name file and field.

Rules: schema and load errors; regex syntax in the portable subset (no look-around, back-references
or line anchors, so every scanning engine accepts it); bounded time on adversarial input; examples
that must and must not fire; no decisive pattern that fires alone on generic text; no two
signatures firing on the same example line without an `explains`, `not` or `related` relation;
the version sweep: every catalogued release's wording of a signature's message fires it; no
written release range excludes a catalogued release that prints the signature's message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import regex

from triage.kb.load import LoadResult, load_signatures
from triage.kb.records import Signature as SignatureRecord
from triage.kb.redos import redos_issues
from triage.kb.schema import Signature
from triage.regexes import compile_linear
from triage.textutil import strip_ansi

# Lines every serving log may contain for reasons unrelated to any one failure: no decisive
# pattern may fire on them alone.
GENERIC_LINES: tuple[str, ...] = (
    "Traceback (most recent call last):",
    "RuntimeError",
    "RuntimeError: CUDA error",
    "RuntimeError: CUDA error: unknown error",
    "torch.AcceleratorError: CUDA error",
    "ERROR 10-25 13:08:43 [core.py:708] EngineCore failed with an error",
    "exit code 1",
    "Process exited with code 1",
    "ValueError",
    "Exception",
    "Error",
    "error",
    "WARNING",
    "FAILED",
    "Killed",
    "CUDA error",
    "NCCL error",
    "AssertionError",
    "Segmentation fault",
    "raise RuntimeError(msg)",
)

# High-frequency lines of a healthy busy server (access log, periodic stats, batch lines). No pattern,
# supporting ones included, may match them: each match costs a confirmation on a line that appears
# millions of times a day, and says nothing about a failure.
FREQUENT_BENIGN_LINES: tuple[str, ...] = (
    '(APIServer pid=1) INFO:     10.1.2.3:45678 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:58610 - "GET /v1/models HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:58610 - "POST /v1/completions HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt throughput: 1534.2 tokens/s, "
    "Avg generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 reqs, GPU KV cache usage: 45.9%, "
    "Prefix cache hit rate: 12.0%",
    "INFO 10-25 13:08:43 [metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 33.1 "
    "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.",
    "(APIServer pid=1) INFO 05-19 10:13:11 [async_llm.py:261] Added request chatcmpl-8f3a2b1c9d.",
    "[2025-09-03 18:33:19 TP0] Decode batch. #running-req: 1, #token: 137, token usage: 0.00, cuda graph: True, "
    "gen throughput (token/s): 1.06, #queue-req: 0,",
    "[2025-09-03 18:33:18 TP0] Prefill batch. #new-seq: 1, #new-token: 103, #cached-token: 1, token usage: 0.00, "
    "#running-req: 0, #queue-req: 0,",
)

# Constructs outside the subset shared by Hyperscan, RE2 and `regex` (or that make scanning
# unsafe): look-around, back-references, atomic groups, possessive quantifiers, line anchors.
_UNPORTABLE = (
    (regex.compile(r"\(\?<?[=!]"), "look-around is not portable to the scanning engines"),
    (regex.compile(r"\\[1-9]|\(\?P=|\\g<"), "back-references are not portable"),
    (regex.compile(r"\(\?>"), "atomic groups are not portable"),
    (regex.compile(r"(?<!\\)[*+?}]\+"), "possessive quantifiers are not portable"),
    (
        regex.compile(r"^\^|(?<![\\[])\^(?![^\[]*\])|(?<!\\)\$"),
        "patterns are never anchored to line start or end (wrappers come first)",
    ),
    (regex.compile(r"\\[AZzG]"), "string anchors are not portable"),
)


@dataclass(frozen=True)
class Issue:
    path: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.field}: {self.message}"


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern, regex.V0)


def line_fires(sig: Signature | SignatureRecord, line: str) -> bool:
    """Does one line fire this signature on its own (a decisive pattern, no confuser)?"""
    text = strip_ansi(line)
    if not any(compile_linear(p.regex).search(text) for p in sig.decisive):
        return False
    return not any(compile_linear(p.regex).search(text) for p in sig.not_)


def _all_patterns(sig: Signature) -> Iterable[tuple[str, str]]:
    for i, p in enumerate(sig.match):
        yield f"match[{i}].regex", p.regex
    for i, p in enumerate(sig.not_):
        yield f"not[{i}].regex", p.regex
    for i, d in enumerate(sig.differential):
        for j, ev in enumerate(d.evidence):
            yield f"differential[{i}].evidence[{j}]", ev
        for j, ev in enumerate(d.against):
            yield f"differential[{i}].against[{j}]", ev


def check_syntax(sig: Signature, path: str) -> list[Issue]:
    issues: list[Issue] = []
    for field, pattern in _all_patterns(sig):
        try:
            compile_pattern(pattern)
        except regex.error as exc:
            issues.append(Issue(path, field, f"bad regex: {exc}"))
            continue
        for rule, message in _UNPORTABLE:
            if rule.search(pattern):
                issues.append(Issue(path, field, message))
        issues.extend(Issue(path, field, msg) for msg in redos_issues(pattern))
        if pattern.count(".*") + pattern.count(".+") > 2:
            issues.append(Issue(path, field, "more than two .* gaps: make the pattern specific"))
    return issues


def adversarial_inputs(pattern: str, size: int = 60_000) -> list[str]:
    """Strings built from the pattern's own literals, repeated, that almost-but-not-quite match."""
    literals = list(regex.findall(r"[A-Za-z_][A-Za-z0-9_ :.'=-]{2,}", pattern)) or ["a"]
    out = []
    for lit in literals[:3]:
        unit = lit + " "
        out.append((unit * (size // len(unit) + 1))[:size])
    out.append("a" * size)
    out.append(" 0" * (size // 2))
    return out


def check_linear_time(sig: Signature, path: str, budget_s: float = 0.25) -> list[Issue]:
    issues: list[Issue] = []
    for field, pattern in _all_patterns(sig):
        try:
            compiled = compile_linear(pattern)
        except regex.error:
            continue
        for text in adversarial_inputs(pattern):
            start = time.perf_counter()
            try:
                compiled.search(text)
            except TimeoutError:
                issues.append(Issue(path, field, "timed out on a 60 kB adversarial string"))
                break
            if time.perf_counter() - start > budget_s:
                issues.append(Issue(path, field, f"slower than {budget_s}s on a 60 kB string"))
                break
    return issues


def check_examples(sig: Signature, path: str) -> list[Issue]:
    issues: list[Issue] = []
    try:
        for i, line in enumerate(sig.examples.match):
            if not line_fires(sig, line):
                issues.append(Issue(path, f"examples.match[{i}]", f"does not fire: {line[:100]!r}"))
        for i, line in enumerate(sig.examples.no_match):
            if line_fires(sig, line):
                issues.append(Issue(path, f"examples.no_match[{i}]", f"fires: {line[:100]!r}"))
    except (regex.error, TimeoutError) as exc:
        issues.append(Issue(path, "examples", f"cannot evaluate: {exc}"))
    return issues


def check_generic(sig: Signature, path: str) -> list[Issue]:
    issues: list[Issue] = []
    for i, p in enumerate(sig.decisive):
        try:
            compiled = compile_pattern(p.regex)
        except regex.error:
            continue
        for generic in GENERIC_LINES:
            if compiled.search(generic):
                issues.append(
                    Issue(path, f"match[{i}].regex", f"fires alone on generic {generic!r}")
                )
                break
    return issues


def check_frequent_benign(sig: Signature, path: str) -> list[Issue]:
    issues: list[Issue] = []
    for field, pattern in _all_patterns(sig):
        if field.startswith("not["):
            continue
        try:
            compiled = compile_linear(pattern)
        except regex.error:
            continue
        for benign in FREQUENT_BENIGN_LINES:
            if compiled.search(benign):
                issues.append(
                    Issue(path, field, f"matches a frequent healthy line: {benign[:70]!r}")
                )
                break
    return issues


def check_overlaps(result: LoadResult) -> list[Issue]:
    """Two signatures firing on the same example line must be related (explains/not/related)."""
    issues: list[Issue] = []
    sigs = [s for s in result.signatures if s.kind != "knowledge"]
    related: set[tuple[str, str]] = set()
    for sig in sigs:
        for name in (*sig.explains, *sig.related):
            related.add((sig.id, name))
            related.add((name, sig.id))
    for sig in sigs:
        for line in sig.examples.match:
            for rival in sigs:
                if rival.id == sig.id or (sig.id, rival.id) in related:
                    continue
                try:
                    fires = line_fires(rival, line)
                except (regex.error, TimeoutError):
                    continue
                if fires:
                    issues.append(
                        Issue(
                            str(result.paths[rival.id]),
                            "match",
                            f"also fires on an example of {sig.id} without explains/not/related: "
                            f"{line[:90]!r}",
                        )
                    )
    return issues


def check_shared_decisive(result: LoadResult) -> list[Issue]:
    """Two signatures with an identical decisive pattern leave the choice between them to
    priority; allowed only when one is declared the other's variant (`variant_of`, the other a
    signature sharing that pattern) and has evidence of its own: a supporting pattern its parent
    does not have (what tells the OOM of one phase from the generic OOM)."""
    issues: list[Issue] = []
    sigs = {s.id: s for s in result.signatures if s.kind != "knowledge"}
    owners: dict[str, list[str]] = {}
    for sig in sigs.values():
        for pattern in sig.decisive:
            ids = owners.setdefault(pattern.regex, [])
            if sig.id not in ids:
                ids.append(sig.id)
    for shared, ids in owners.items():
        if len(ids) < 2:
            continue
        for sig_id in ids:
            sig = sigs[sig_id]
            parent = sigs.get(sig.variant_of or "")
            if parent is None or parent.id not in ids:
                # the one member nobody's variant: the group's parent (exactly one may be)
                if all(sigs[o].variant_of in ids for o in ids if o != sig_id):
                    continue
                issues.append(
                    Issue(
                        str(result.paths[sig_id]),
                        "match",
                        f"decisive pattern {shared[:60]!r} is also decisive in "
                        f"{', '.join(o for o in ids if o != sig_id)}: declare variant_of with "
                        "evidence of its own, or make the patterns differ",
                    )
                )
                continue
            own = {p.regex for p in sig.supporting} - {p.regex for p in parent.supporting}
            if not own:
                issues.append(
                    Issue(
                        str(result.paths[sig_id]),
                        "variant_of",
                        f"a variant of {parent.id} needs a supporting pattern of its own (the "
                        "evidence that tells it from its parent)",
                    )
                )
    return issues


# Version-sweep misses that are right as they are, each with why: (signature id, the start of the
# catalogued wording) -> reason. A miss not listed is an issue: widen the pattern to that release's
# wording, or explain it here. (docs/catalog.md lists them too.)
SWEEP_EXPLAINED: dict[tuple[str, str], str] = {
    ("nccl-remote-error", "NET/IB"): "keys on the ncclRemoteError result NCCL prints after the IB "
    "completion WARN, not on the WARN's wording (which varies by release)",
    ("nccl-shm-segment-create-failed", "Error while <*> shared memory segment"): "the placeholder "
    "is 'creating' or 'attaching to', both decisive patterns; the sweep's fillers cannot guess it",
    (
        "nccl-shm-segment-create-failed",
        "Error: failed to create shared memory file",
    ): "the shm_open "
    "failure, another message of the same function (the supporting 'Call to shm_open' covers it)",
    ("torch-dlpack-requires-grad", "Can't export tensors with"): "sibling BufferErrors of "
    "__dlpack__ (layout, conjugate bit): other causes, not rewordings",
    ("vllm-auto-tool-choice-needs-parser", "Error: --enable-"): "sibling checks of "
    "validate_parsed_serve_args for other flags (log outputs, reasoning parser)",
    ("vllm-mm-limit-per-prompt-exceeded", "limit_mm_per_prompt is only supported"): "vLLM 0.5.5's "
    "sibling check of _init_multimodal_config (the flag given for a text-only model): another "
    "failure, not a rewording",
    ("vllm-max-model-len-exceeds-derived", "<*> To allow overriding this maximum"): "the leading "
    "placeholder is the 'User-specified max_model_len' text the decisive pattern matches",
    ("vllm-mistral-tokenizer-mode-mismatch", "Found <*> files matching the pattern"): "the pattern "
    "is for zero tekken files; more than one file is another failure of the same function",
    ("dynamo-etcd-connect-failed", "Failed to connect to master"): "the example is Dynamo's own "
    "line (Rust, not catalogued); Mooncake's store client prints the same words for its own etcd "
    "and, beside them, its master connection failure: another program's sibling, not a rewording",
    ("rl-weight-sync-param-name-mismatch", "There is no module or parameter named"): "keys on "
    "the 'model' prefix a trainer's weight sync sends into a wrapper class (the text tower's names); "
    "every other name is checkpoint-unexpected-weight-key's, whose pattern takes any filling",
    ("pyxis-container-start-failed", "pyxis: failed to create container filesystem"): "a sibling "
    "failure of pyxis 0.24's enroot_container_create (an image already imported, or a squashfs "
    "file, whose filesystem could not be made); the import failure's wording there only gains "
    "': <image>', which the decisive pattern matches",
}


def check_version_sweep(result: LoadResult) -> list[Issue]:
    """Every decisive pattern against the message catalog: for each catalogued release whose source
    prints the signature's message (found by locating its example lines), the release's wording
    must fire a decisive pattern (see `triage.catalog.sweep`). Skipped when no catalog is shipped."""
    from triage.catalog import open_catalog

    catalog = open_catalog()
    if catalog is None:
        return []
    issues: list[Issue] = []
    for sig in result.signatures:
        if sig.kind == "knowledge" or not sig.examples.match:
            continue
        path = str(result.paths[sig.id])
        explained = [w for (sid, w) in SWEEP_EXPLAINED if sid == sig.id]
        misses = [
            m
            for m in catalog.sweep(sig, [strip_ansi(x) for x in sig.examples.match])
            if not any(m.wording.startswith(w) for w in explained)
        ]
        issues.extend(Issue(path, "match", f"version sweep: {miss}") for miss in misses)
    return issues


# Catalog contradictions of a written applies_to range that are right as they are, each with why:
# (signature id, component) -> reason. (docs/catalog.md lists them too.)
APPLIES_EXPLAINED: dict[tuple[str, str], str] = {}


def check_catalog_applies(result: LoadResult) -> list[Issue]:
    """Every written `applies_to.versions` range against the message catalog: a catalogued release
    that prints the signature's message (its example lines, located; see
    `triage.catalog.applies`) must be inside the range, else a log of that release that prints it
    is scored as out of range. Skipped when no catalog is shipped."""
    from triage.catalog import COMPONENT_OF
    from triage.kb.applies import contradicts, derive_all

    components = set(COMPONENT_OF.values())
    ranged = [s.id for s in result.signatures if components & set(s.applies_to.versions)]
    rows = derive_all(result, ranged) if ranged else []
    if rows is None:
        return []
    issues: list[Issue] = []
    for row in rows:
        for d in row.derived:
            if (row.signature, d.component or "") in APPLIES_EXPLAINED:
                continue
            issues.extend(
                Issue(str(row.path), "applies_to.versions", f"the message catalog: {c}")
                for c in contradicts(d, row.hand)
            )
    return issues


def check_capture_names(sig: Signature, path: str) -> list[Issue]:
    """A capture whose name reads as a credential's (`load_key`, `mlir_pass`) is redacted from
    every report by its name, so the value it captures is never shown: name it for what it is."""
    from triage.redact import is_secret_name

    names = {
        name
        for _, pattern in _all_patterns(sig)
        for name in regex.findall(r"\(\?P<(\w+)>", pattern)
        if is_secret_name(name)
    }
    return [
        Issue(
            path, "match", f"capture name {name!r} reads as a secret's and is redacted from reports"
        )
        for name in sorted(names)
    ]


PER_SIGNATURE_RULES: tuple[Callable[[Signature, str], list[Issue]], ...] = (
    check_syntax,
    check_capture_names,
    check_examples,
    check_generic,
    check_frequent_benign,
)


def lint(root: Path | None = None, *, timing: bool = True) -> list[Issue]:
    """Run every rule over the knowledge base under root."""
    result = load_signatures(root)
    issues = [Issue(e.path, e.field, e.message) for e in result.errors]
    for sig in result.signatures:
        path = str(result.paths[sig.id])
        for rule in PER_SIGNATURE_RULES:
            issues.extend(rule(sig, path))
        if timing:
            issues.extend(check_linear_time(sig, path))
    issues.extend(check_overlaps(result))
    issues.extend(check_shared_decisive(result))
    issues.extend(check_version_sweep(result))
    issues.extend(check_catalog_applies(result))
    return issues


def main(argv: list[str] | None = None) -> int:
    import fnmatch
    import sys

    args = sys.argv[1:] if argv is None else argv
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        args = args[:i] + args[i + 2 :]
    root = Path(args[0]) if args else None
    issues = lint(root)
    if only:
        issues = [x for x in issues if fnmatch.fnmatch(Path(x.path).name, only) or only in x.path]
    for issue in issues:
        print(issue)
    print(f"{len(issues)} issue(s)")
    return 1 if issues else 0


if __name__ == "__main__":
    raise SystemExit(main())
