"""Renderers of a Report: text (rich), json, markdown (the bot's comment), jsonl events."""

from __future__ import annotations

from enum import StrEnum


class Format(StrEnum):
    text = "text"
    json = "json"
    markdown = "markdown"
    jsonl = "jsonl"
