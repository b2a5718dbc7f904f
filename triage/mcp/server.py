"""The MCP tools: `triage_log` (a log in, the JSON report out), `kb_search` and `kb_show`.

An agent (HolmesGPT, an IDE assistant, Claude Desktop) calls them instead of guessing from raw
log text: the answer is the deterministic, tested diagnosis. Built on the MCP Python SDK's
high-level server (`mcp.server.mcpserver.MCPServer`, mcp 2.x) and served over stdio.

What leaves through these tools goes to an agent, often a hosted model, so every string of a
report is passed through `triage.redact.redact` first (logged prompts are already elided by the
engine). Runs are not recorded in the history: an agent that re-reads a log must not inflate the
counts. With `root`, paths outside that directory are refused.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from triage.redact import redact

MAX_TEXT_BYTES = 16 << 20  # a pasted log; larger ones should be given as a path
INSTRUCTIONS = (
    "triage diagnoses vLLM / SGLang / PyTorch / NCCL / CUDA / driver logs against a tested "
    "knowledge base. Call triage_log with a log file path or the log text; each hypothesis "
    "names a signature, its layer, the evidence lines and staged fixes. kb_search finds "
    "signatures by words or a pasted error line; kb_show gives one signature in full."
)


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    return value


class Tools:
    """The tools' work, independent of the MCP library (the engine is compiled once, lazily)."""

    def __init__(self, signatures: Path | None = None, root: Path | None = None) -> None:
        self.signatures = signatures
        self.root = root.resolve() if root else None
        self._engine: Any = None

    def engine(self) -> Any:
        if self._engine is None:
            from triage.api import Engine
            from triage.kb.store import load_current

            self._engine = Engine(load_current(self.signatures))
        return self._engine

    def _path(self, path: str) -> Path:
        resolved = Path(path).expanduser().resolve()
        if self.root is not None and not resolved.is_relative_to(self.root):
            raise ValueError(f"{path}: outside the directory this server may read ({self.root})")
        if not resolved.exists():
            raise ValueError(f"{path}: no such file or directory")
        return resolved

    def triage_log(self, path: str | None = None, text: str | None = None) -> dict[str, Any]:
        from triage.api import InputSpec
        from triage.render.json import render_json

        if (path is None) == (text is None):
            raise ValueError("give exactly one of path (a log file or run directory) or text")
        engine = self.engine()
        if path is not None:
            report = engine.run([str(self._path(path))])
        else:
            data = (text or "").encode("utf-8")
            if len(data) > MAX_TEXT_BYTES:
                raise ValueError(f"text is larger than {MAX_TEXT_BYTES >> 20} MiB: give a path")
            stream = io.BufferedReader(io.BytesIO(data))
            report = engine.run_inputs([InputSpec("<text>", stream=stream)], strict=True)
        data_out: dict[str, Any] = _redacted(json.loads(render_json(report)))
        return data_out

    def kb_search(self, query: str, limit: int = 10) -> dict[str, Any]:
        import contextlib

        from triage.kb.commands import open_kb, search_fts, search_fuzzy

        limit = max(1, min(limit, 50))
        conn = open_kb(self.signatures, None)
        with contextlib.closing(conn):
            found = search_fts(conn, query, limit)
            mode = "fts"
            if not found:
                found, mode = search_fuzzy(conn, query, limit=min(limit, 5)), "fuzzy"
        return {"query": query, "mode": mode, "results": [asdict(f) for f in found]}

    def kb_show(self, id: str) -> dict[str, Any]:
        kb = self.engine().kb
        sig = kb.by_id.get(id) or next((s for s in kb.signatures if id in s.aliases), None)
        if sig is None:
            raise ValueError(f"no signature {id!r} (find one with kb_search)")
        data = asdict(sig)
        data["not"] = data.pop("not_")
        return {k: data[k] for k in ["id", *[k for k in data if k != "id"]]}


def build(signatures: Path | None = None, root: Path | None = None) -> Any:
    """The MCP server object with the three tools registered."""
    from triage import __version__
    from triage.read import InputError

    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise RuntimeError(
            f"`triage mcp` needs the MCP SDK 2.x: pip install 'triage[mcp]' ({exc})"
        ) from None
    tools = Tools(signatures, root)

    def answered(call: Any, *args: Any) -> dict[str, Any]:
        """A caller's mistake (unknown id, bad path) as the tool's error text, for the agent."""
        try:
            result: dict[str, Any] = call(*args)
        except (ValueError, OSError, InputError) as exc:
            raise ToolError(str(exc)) from None
        return result

    server = MCPServer("triage", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(name="triage_log")
    def triage_log(path: str | None = None, text: str | None = None) -> dict[str, Any]:
        """Triage an LLM-serving log: give `path` (a log file, .gz/.zst, or a run directory) or
        `text` (the log itself). Returns the triage.report/1 JSON object: `hypotheses` best first
        (signature, title, layer, severity, score, evidence lines, fixes, verify) and
        `unrecognized` error lines that no known signature explains."""
        return answered(tools.triage_log, path, text)

    @server.tool(name="kb_search")
    def kb_search(query: str, limit: int = 10) -> dict[str, Any]:
        """Search the failure knowledge base by words or a pasted error line; returns signature
        ids, titles and layers, best first."""
        return answered(tools.kb_search, query, limit)

    @server.tool(name="kb_show")
    def kb_show(id: str) -> dict[str, Any]:
        """One knowledge-base signature in full: its patterns, cause, staged fixes with their
        confidence, how to verify a fix, references."""
        return answered(tools.kb_show, id)

    return server
