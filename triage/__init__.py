"""triage: a failure knowledge base and log triage engine for LLM inference serving."""

from __future__ import annotations

import os

# pydantic scans every installed package's entry points for plugins at first use; triage uses none,
# and the scan costs tens of milliseconds of start-up.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

__version__ = "0.1.0"

__all__ = ["__version__", "load_kb", "triage"]


def __getattr__(name: str) -> object:
    # Lazy public API: importing the package stays cheap for the CLI's start-up.
    if name in ("triage", "load_kb", "Engine", "Report"):
        from triage import api, models

        return {
            "triage": api.triage,
            "load_kb": api.load_kb,
            "Engine": api.Engine,
            "Report": models.Report,
        }[name]
    raise AttributeError(name)
