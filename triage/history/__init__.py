"""Triage history: what fired where, the queue of unexplained failures, and human feedback.

`record_run` stores one report; `seen_summary` answers "seen 14 times in the last 30 days, last on
host gpu-3" for the bot. The database schema, pragmas and write transactions live in `schema`.

The names below are imported on first use (PEP 562): a triage run imports only the recorder, not
the queries and reports of the history commands.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from triage.history.query import seen_summary
    from triage.history.recorder import record_run
    from triage.history.schema import HistoryError, default_db_path

__all__ = ["HistoryError", "default_db_path", "record_run", "seen_summary"]

_HOMES = {
    "seen_summary": "triage.history.query",
    "record_run": "triage.history.recorder",
    "HistoryError": "triage.history.schema",
    "default_db_path": "triage.history.schema",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'triage.history' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
