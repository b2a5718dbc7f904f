"""ReDoS: the signature lint rejects patterns that backtrack catastrophically, accepts honest ones,
and every shipped signature runs in bounded time on adversarial 60 kB strings through the real
confirm path (`triage.regexes.compile_linear`).

The evil list mixes the textbook shapes (nested quantifiers, overlapping alternation, adjacent
gaps) with log-style mistakes a signature author could plausibly write.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from triage.kb.lint import _all_patterns, adversarial_inputs, check_linear_time, check_syntax
from triage.kb.load import load_signatures
from triage.kb.redos import redos_issues
from triage.kb.schema import Signature
from triage.regexes import _re2, compile_linear

EVIL: tuple[str, ...] = (
    # nested quantifiers: exponential
    r"(a+)+b",
    r"(a*)*b",
    r"(\d+)*x",
    r"((a+))+b",
    r"(?:x+x+)+y",
    r"(?:a+|b)+c",
    r"(a{1,5}){2,}x",
    r"(.*a){11}",
    r"(\w+\s?)+:",
    r"(?:\S+\s*)+=",
    r"(\d+\.?)+x",
    r"(?:[A-Za-z]+ ?)+Exception",
    r"(?:[^ ]+ ?)*=",
    r"(?:.*,)*x",
    r"([\w.]+)+Error:",
    r"ERROR: (.*)+ failed",
    r"(?:(?:ab)*c?)+d",
    r"(a?){25}b",
    # overlapping alternation under a repeat: exponential
    r"(a|aa)+b",
    r"(a|a)*b",
    r"(\d|\d\d)+x",
    r"(\w|\d)+!",
    r"(\s|.)*end",
    r"(?i)(?:A|a)+!",
    r"(?:CUDA|CUDA error)+:",
    # adjacent overlapping gaps and leading gaps: polynomial (the Cloudflare 2019 shape)
    r".*.*=.*",
    r".*(?:.*=.*)",
    r".*=.*;",
    r"\s*\s*x",
    r"a*a*a*b",
    r"\w+\s*\w+=",
    # anchored classics (also refused as unportable)
    r"^(\w+\s?)*$",
    r"(a+)+$",
)

SAFE: tuple[str, ...] = (
    r"CUDA error: an illegal memory access was encountered",
    r"torch\.OutOfMemoryError: CUDA out of memory",
    r"Tried to allocate (?P<requested>[0-9.]+ [KMG]iB)",
    r"GPU (?P<gpu>\d+) has a total capacity of (?P<capacity>[0-9.]+ [KMG]iB) of which "
    r"(?P<free>[0-9.]+ [KMG]iB) is free",
    r"NCCL WARN (?:socket(?:Start|Poll)Connect: )?Connect to (?P<peer>\S+) (?:failed|returned)",
    r"WorkNCCL\(.*OpType=(?P<op>[A-Z_]+).*Timeout\(ms\)=(?P<ms>\d+)\)",
    r"Avg prompt throughput: 0\.0 tokens/s, (?:[^,]{1,40}, ){0,3}Running: [1-9][0-9]* reqs",
    r"(?i)cuda error: (?:out of memory|an illegal memory access)",
    r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): (?P<xid>\d+), pid=\d+",
    r"RuntimeError: NCCL error in: \S+, unhandled system error",
    r"Unknown CUDA arch \((?P<arch>[^)]+)\) or GPU not supported",
    r"\[Errno 28\] No space left on device",
    r"soft lockup - CPU#\d+ stuck for \d+s! \[(?P<task>[^:\]]+):(?P<pid>\d+)\]",
    r"(?:vllm(?: serve)?|api_server\.py): error: unrecognized arguments: (?P<args>.+)",
    r"Worker (?:proc )?[A-Za-z_]+ died unexpectedly",
    r"\bOOMKilled\s+\d+ \(",
    r"(?P<feature>[^ ]+(?: [^ ]+)?) is not supported by the V1 Engine",
    r"NCCL version (?P<v>\d+\.\d+\.\d+)",
)

# Shapes with a quantified group that are nevertheless unambiguous: the finer rule of
# `redos_issues` accepts them (the coarse textual rule in lint.py may not).
SAFE_FOR_REDOS_ONLY: tuple[str, ...] = (
    r"(?:\d+\.)+\d+",
    r"(?:[^,]+,)+x",
    r"(ab?)+c",
    r"(?:Start|Poll)+Connect",
    r"(?:GiB|MiB)+",
    r"\S+\s+\S+",
)


def _signature(pattern: str) -> Signature:
    data: dict[str, Any] = {
        "id": "redos-probe",
        "title": "A signature built by the ReDoS tests",
        "layer": "engine",
        "severity": "error",
        "status": "open",
        "summary": "A probe signature that carries one pattern under test.",
        "match": [{"regex": pattern}],
        "fixes": [{"do": "nothing to do", "confidence": "lead"}],
        "provenance": {"reproduction": "tests/test_redos.py"},
        "examples": {"match": ["x"], "no_match": ["y"]},
    }
    return Signature.model_validate(data)


def _lint_with_redos(pattern: str) -> list[str]:
    sig = _signature(pattern)
    issues = [i.message for i in check_syntax(sig, "probe.yaml")]
    issues += [i.message for i in check_linear_time(sig, "probe.yaml")]
    issues += redos_issues(pattern)
    return issues


@pytest.mark.parametrize("pattern", EVIL)
def test_redos_rule_rejects_evil(pattern: str) -> None:
    assert redos_issues(pattern), f"not flagged: {pattern!r}"


@pytest.mark.parametrize("pattern", EVIL)
def test_lint_with_redos_rule_rejects_evil(pattern: str) -> None:
    assert _lint_with_redos(pattern)


def test_check_syntax_alone_rejects_every_evil_pattern() -> None:
    missed = [p for p in EVIL if not check_syntax(_signature(p), "probe.yaml")]
    assert not missed, f"check_syntax accepts: {missed}"


@pytest.mark.parametrize("pattern", SAFE)
def test_safe_patterns_accepted(pattern: str) -> None:
    assert _lint_with_redos(pattern) == []


@pytest.mark.parametrize("pattern", SAFE_FOR_REDOS_ONLY)
def test_unambiguous_quantified_groups_accepted_by_redos_rule(pattern: str) -> None:
    assert redos_issues(pattern) == []


def test_redos_rule_never_raises_on_odd_syntax() -> None:
    for pattern in (
        r"\p{L}+",
        r"(?<name>a)",
        "(" * 200 + "a" + ")" * 200 + "+",
        r"[",
        r"a{99999}",
        r"(?(1)a|b)",
        r"(?>a+)+",
        r"a++",
        "\\",
        r"(?#comment)x*",
    ):
        assert isinstance(redos_issues(pattern), list)


# ---------------------------------------------------------------------------------------------
# every shipped signature, on adversarial strings up to 60 kB, through the real confirm path

SIZE = 60_000
BUDGET_S = 0.1  # RE2 takes < 10 ms on these; the limit leaves room for a loaded CI machine


def _kb_patterns() -> list[tuple[str, str, str, list[str]]]:
    result = load_signatures()
    out = []
    for sig in result.signatures:
        lines = [*sig.examples.match[:2], *sig.examples.no_match[:1]]
        for field, pattern in _all_patterns(sig):
            out.append((sig.id, field, pattern, lines))
    return out


KB_PATTERNS = _kb_patterns()


def _attacks(pattern: str, lines: list[str]) -> list[str]:
    out = adversarial_inputs(pattern, SIZE)
    for line in lines:
        unit = line + " "
        out.append((unit * (SIZE // len(unit) + 1))[:SIZE])  # the example, over and over
        out.append(line[:-1] + "9" * (SIZE - len(line)))  # almost the example, then a long tail
    out += [
        "9" * SIZE,
        " " * SIZE,
        ("\t x" * SIZE)[:SIZE],
        ("a1_." * SIZE)[:SIZE],
        ("=;" * SIZE)[:SIZE],
        ("\u00e9\u4e2d" * SIZE)[:SIZE],
    ]
    return out


def test_kb_has_patterns() -> None:
    assert len(KB_PATTERNS) > 100


def test_shipped_kb_has_no_redos_shapes() -> None:
    flagged = [
        (sid, field, p, redos_issues(p)) for sid, field, p, _ in KB_PATTERNS if redos_issues(p)
    ]
    assert flagged == []


@pytest.mark.skipif(_re2 is None, reason="google-re2 is not installed")
def test_every_signature_confirms_on_the_linear_engine() -> None:
    backtracking = [
        (sid, field) for sid, field, p, _ in KB_PATTERNS if not compile_linear(p).linear
    ]
    assert backtracking == []


def test_every_signature_linear_time_on_adversarial_60kb() -> None:
    slow = []
    for sid, field, pattern, lines in KB_PATTERNS:
        compiled = compile_linear(pattern)
        for text in _attacks(pattern, lines):
            assert len(text) <= SIZE
            start = time.perf_counter()
            try:
                compiled.search(text)
            except TimeoutError:
                slow.append((sid, field, "timeout"))
                break
            took = time.perf_counter() - start
            if took > BUDGET_S:
                slow.append((sid, field, f"{took:.3f}s"))
                break
    assert slow == []


def test_evil_pattern_confirm_path_stays_bounded() -> None:
    """Even a pattern lint would refuse runs in bounded time through compile_linear."""
    compiled = compile_linear(r"(a+)+b")
    start = time.perf_counter()
    # the `regex` fallback gives up at its timeout: bounded, not a hang
    with contextlib.suppress(TimeoutError):
        compiled.search("a" * 30 + "!")
    assert time.perf_counter() - start < 2.0
