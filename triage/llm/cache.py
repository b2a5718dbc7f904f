"""Answers already received, so the same question is never sent twice.

Keyed by (input digest, knowledge-base digest, model, prompt version): the input digest is the
SHA-256 of the exact request message (the cleaned evidence and the candidates), so any change to
what the model would read is a new key. What is stored is the server's raw answer; it is checked
again on every use, as if it had just arrived. Files live in `<user cache>/triage/llm/`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from triage.llm.client import Completion


def directory() -> Path:
    from triage.kb.store import cache_dir

    return cache_dir() / "llm"


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def key(input_digest: str, kb_digest: str, model: str, prompt_version: str) -> str:
    joined = "\0".join((input_digest, kb_digest, model, prompt_version))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


def load(cache_key: str) -> Completion | None:
    try:
        data = json.loads((directory() / f"{cache_key}.json").read_text(encoding="utf-8"))
        return Completion(content=str(data["content"]), model=str(data["model"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(cache_key: str, completion: Completion) -> None:
    """Write atomically; a cache that cannot be written is no error (the answer is still shown)."""
    folder = directory()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{cache_key}.{os.getpid()}.tmp"
        tmp.write_text(
            json.dumps({"content": completion.content, "model": completion.model}),
            encoding="utf-8",
        )
        os.replace(tmp, folder / f"{cache_key}.json")
