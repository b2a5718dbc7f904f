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


@pytest.fixture(autouse=True, scope="session")
def _private_user_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never write the user's history database or caches (subprocesses inherit this)."""
    import os

    base = tmp_path_factory.mktemp("user-dirs")
    os.environ["TRIAGE_DB"] = str(base / "history.db")
    os.environ["TRIAGE_CACHE_DIR"] = str(base / "cache")
    os.environ.pop("TRIAGE_KB", None)
