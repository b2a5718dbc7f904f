"""The confirmation memo (triage/confirm_cache.py) never changes a report.

Every corpus file and example is triaged with the memo on and off and the JSON reports compared
whole (hypotheses, evidence lines, counts, facts, unrecognized lines); the reuse rule itself is
checked on real candidate lines whose numbers are rewritten at random.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest

from triage.api import Engine, InputSpec, KnowledgeBase
from triage.confirm_cache import ConfirmCache, digit_blind
from triage.match import Matcher
from triage.read import read_source
from triage.regexes import compile_linear

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted(ROOT.glob("corpus/*/*.log")) + sorted(ROOT.glob("examples/*.log"))


@pytest.mark.parametrize(
    ("regex", "blind"),
    [
        ("CUDA out of memory", True),
        (r"\bNCCL WARN\b", True),
        ("(?i)illegal memory access", True),
        ("[A-Za-z_]+ failed", True),
        ("[^0-9]x", True),
        (r"Xid \d+", False),
        ("rank (?P<rank>[0-9]+)", False),
        ("exit code: -9", False),
        ("foo.bar", False),  # `.` matches a digit
        (r"\w+ failed", False),
        ("[^a]x", False),
        ("x?", False),  # can match the empty string, e.g. between two digits
        (r"\B", False),
        ("[[:digit:]]", False),  # RE2's POSIX class, which Python's parser reads as a set
        (r"\pN", False),
        ("x{,3}", False),  # RE2 reads `{,3}` as literal text, digit included
        ("(", False),  # unparsable: never assumed blind
    ],
)
def test_digit_blind(regex: str, blind: bool) -> None:
    assert digit_blind(regex) is blind


def test_engine_reports_identical_with_and_without_the_memo(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every corpus file and example: the same report, byte for byte, either way."""
    engine = Engine(kb)
    original = Matcher.__init__

    def without_memo(self: Matcher, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.confirmer = ConfirmCache(enabled=False)

    for path in LOGS:
        with_memo = engine.run_inputs([InputSpec(path.name, path)])
        with monkeypatch.context() as patch:
            patch.setattr(Matcher, "__init__", without_memo)
            plain = engine.run_inputs([InputSpec(path.name, path)])
        assert json.dumps(with_memo.to_json_dict()) == json.dumps(plain.to_json_dict()), path


def test_a_repeated_failure_is_confirmed_once(engine: Engine) -> None:
    """Fifty ranks print the same warning, differing in numbers only: one search per pattern."""
    matcher = engine.new_matcher()
    text = "".join(
        f"[rank{r}]:[E1129 18:43:{r:02d}.85 ProcessGroupNCCL.cpp:689] NCCL WARN Cuda failure "
        f"'out of memory' on rank {r}\n"
        for r in range(50)
    ).encode()
    _, segments = read_source("x.log", None, stdin=io.BytesIO(text))
    for seg in segments:
        matcher.feed(seg)
    confirmer = matcher.confirmer
    assert confirmer.reused >= 49 * confirmer.searches // 50 - 1, (
        confirmer.reused,
        confirmer.searches,
    )
    hits = [h for h in matcher.result.hits if h.line.text.endswith("rank 49")]
    assert hits and all(h.line.process == "rank49" for h in hits)  # framed per line


def test_reuse_rule_holds_on_real_lines_with_numbers_rewritten(kb: KnowledgeBase) -> None:
    """For each digit-blind pattern and corpus line it matches (or nearly: same first word), the
    captures are the same after every digit run is replaced by a random one."""
    rng = random.Random(7)
    lines = [
        line
        for path in LOGS
        for line in path.read_text(errors="replace").splitlines()
        if any(ch.isdigit() for ch in line) and len(line) < 2000
    ]
    lines = rng.sample(lines, 1500)
    patterns = sorted({p.regex for s in kb.signatures for p in s.match if digit_blind(p.regex)})
    checked = 0
    for regex in patterns:
        compiled = compile_linear(regex)
        for line in lines:
            found = compiled.search(line)
            if found is None and rng.random() > 0.002:
                continue
            for _ in range(3):
                variant = re.sub(
                    r"[0-9]+", lambda _m: str(rng.randrange(10 ** rng.randint(1, 6))), line
                )
                other = compiled.search(variant)
                assert (found is None) == (other is None), (regex, line, variant)
                if found is not None and other is not None:
                    assert found.captures == other.captures, (regex, line, variant)
                checked += 1
    assert checked > 1000


def test_input_order_is_the_tuple_order() -> None:
    """`api._input_order` (stable one-key sorts) gives the order of one sort on the tuple
    (input position, line number, pattern index), ties in their given order."""
    from triage.api import _input_order
    from triage.models import Hit, Line

    rng = random.Random(20)
    for inputs in (["a.log"], ["a.log", "b.log", "c.log"]):
        position = {name: i for i, name in enumerate(inputs)}
        hits = [
            Hit(
                signature=str(n),
                pattern_index=rng.randrange(40),
                role="decisive",
                line=Line(rng.choice([*inputs, "stray"]), rng.randrange(1, 300), "x"),
            )
            for n in range(2000)
        ]
        expected = sorted(
            hits, key=lambda h: (position.get(h.line.input, -1), h.line.number, h.pattern_index)
        )
        assert [id(h) for h in _input_order(hits, position)] == [id(h) for h in expected]


def test_confirm_keeps_a_bounded_number_of_compiled_patterns() -> None:
    from triage.confirm_cache import MAX_COMPILED, _confirmer

    cache = ConfirmCache(enabled=True)
    for n in range(MAX_COMPILED + 50):
        assert cache.captures(f"needle{n}x", f"a needle{n}x here") == {}
    assert _confirmer.cache_info().currsize <= MAX_COMPILED
