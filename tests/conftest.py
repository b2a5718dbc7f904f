"""Shared fixtures: the shipped knowledge base and one compiled engine per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage.api import Engine, KnowledgeBase, load_kb

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def kb() -> KnowledgeBase:
    return load_kb()


@pytest.fixture(scope="session")
def engine(kb: KnowledgeBase) -> Engine:
    return Engine(kb)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-seconds",
        type=float,
        default=3.0,
        help="seconds each atheris fuzz target runs (longer on demand)",
    )
