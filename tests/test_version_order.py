"""facts.parse_version orders versions as PEP 440 does (checked against packaging, which the
preflight uses), for the shapes logs and `applies_to` ranges write."""

from __future__ import annotations

import itertools

import pytest
from packaging.version import Version

from triage.facts import parse_version

VERSIONS = (
    "0.6.3",
    "0.6.3.post1",
    "0.6.3rc1",
    "0.6.3.dev5",
    "0.6.3rc1.dev2",
    "0.6.3a1",
    "0.6.3b2",
    "0.7",
    "0.7.0",
    "0.11.0rc2.dev98+g393de22d2",
    "12.4",
    "12.4.1",
    "0.6.10",
    "1.0.post1.dev3",
    "1.0.post1",
    "2",
    "550.144.03",
)


@pytest.mark.parametrize(("a", "b"), list(itertools.product(VERSIONS, VERSIONS)))
def test_order_matches_pep_440(a: str, b: str) -> None:
    key_a, key_b = parse_version(a), parse_version(b)
    assert key_a is not None and key_b is not None
    ref_a, ref_b = Version(a.split("+")[0]), Version(b.split("+")[0])
    assert (key_a < key_b) == (ref_a < ref_b)
    assert (key_a == key_b) == (ref_a == ref_b)


def test_text_without_a_version_is_none() -> None:
    assert parse_version("unknown") is None
    assert parse_version("") is None
