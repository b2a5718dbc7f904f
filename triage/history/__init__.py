"""Triage history: what fired where, the queue of unexplained failures, and human feedback.

`record_run` stores one report; `seen_summary` answers "seen 14 times in the last 30 days, last on
host gpu-3" for the bot. The database schema, pragmas and write transactions live in `schema`.
"""

from __future__ import annotations

from triage.history.query import seen_summary
from triage.history.recorder import record_run
from triage.history.schema import HistoryError, default_db_path

__all__ = ["HistoryError", "default_db_path", "record_run", "seen_summary"]
