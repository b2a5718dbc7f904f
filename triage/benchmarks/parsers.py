"""Read benchmark outputs into `Point`s.

Formats (field names from the tools' own sources; see docs/bench.md):
- `vllm bench serve` result JSON (`--save-result`; per-request lists need `--save-detailed`;
  `--append-result` writes several JSON objects into one file);
- SGLang `bench_serving` JSONL (one run per line; per-request lists with `--output-details`);
- AIPerf / GenAI-Perf: `profile_export.jsonl` (one record per request) and GenAI-Perf's older
  `profile_export.json` (`experiments[].requests[]` with nanosecond timestamps);
- GuideLLM `benchmarks.json` (`benchmarks[].requests.successful/errored/incomplete`);
- a plain CSV with one row per request (column names below).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from triage.benchmarks.model import Point, Request


class BenchInputError(Exception):
    """A results file that cannot be read or is not a benchmark output we know."""


RESULT_SUFFIXES = (".json", ".jsonl", ".csv")
# Files we write ourselves or that hold no results; skipped when a directory is walked.
SKIP_NAMES = ("triage_invalid_rows.csv", "triage.json", "inputs.json")

_SEED_KEYS = ("seed", "prompt_seed", "random_seed", "dataset_seed")
_TIMEOUT_KEYS = ("timeout", "timeout_s", "request_timeout", "client_timeout")


def expand(paths: list[str]) -> list[Path]:
    """Files named, and result files found under directories (sorted by path)."""
    out: list[Path] = []
    for name in paths:
        p = Path(name)
        if p.is_dir():
            out.extend(
                f
                for f in sorted(p.rglob("*"))
                if f.is_file()
                and f.suffix in RESULT_SUFFIXES
                and f.name not in SKIP_NAMES
                and not f.name.endswith(".pytorch.json")
            )
        elif p.is_file():
            out.append(p)
        else:
            raise BenchInputError(f"{name}: no such file or directory")
    return out


def load(paths: list[str]) -> list[Point]:
    """Every point of every file, numbered in the order given (files, then runs within a file)."""
    points: list[Point] = []
    for path in expand(paths):
        points.extend(parse_file(path))
    points = split_csv_points(points)
    # vllm bench serve stamps each result with its start date (YYYYMMDD-HHMMSS): when every point
    # has one, that is the order the server saw them in; otherwise the order given.
    dates = [p.extra.get("date") for p in points]
    if points and all(isinstance(d, str) and d for d in dates):
        points.sort(key=lambda p: str(p.extra["date"]))
    for i, p in enumerate(points):
        p.order = i
    return points


def parse_file(path: Path) -> list[Point]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise BenchInputError(f"{path}: {exc.strerror or exc}") from None
    if path.suffix == ".csv":
        return [_parse_csv(path, text)]
    docs = list(_json_documents(text))
    if not docs:
        raise BenchInputError(f"{path}: no JSON document in it")
    if all(isinstance(d, dict) and "metadata" in d and "metrics" in d for d in docs):
        return [_parse_aiperf(path, docs)]
    points: list[Point] = []
    for i, doc in enumerate(docs):
        label = path.name if len(docs) == 1 else f"{path.name}#{i}"
        if not isinstance(doc, dict):
            continue
        if isinstance(doc.get("benchmarks"), list):
            points.extend(_parse_guidellm(path, doc))
        elif isinstance(doc.get("experiments"), list):
            points.extend(_parse_genai_perf(path, doc))
        elif any(k in doc for k in ("ttfts", "completed", "request_throughput")):
            points.append(_parse_vllm_like(path, label, doc))
    if not points:
        raise BenchInputError(f"{path}: not a benchmark result format triage knows")
    return points


def _json_documents(text: str) -> Iterator[Any]:
    """One JSON value, JSON lines, or JSON objects written one after another (--append-result)."""
    decoder = json.JSONDecoder()
    pos, n = 0, len(text)
    while pos < n:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            # a broken line in a JSONL file: skip to the next line
            nl = text.find("\n", pos)
            if nl < 0:
                break
            pos = nl + 1
            continue
        yield value
        pos = end


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def _int(value: Any) -> int | None:
    f = _num(value)
    return int(f) if f is not None else None


def _digest(*parts: str) -> str:
    h = hashlib.sha1(usedforsecurity=False)
    for part in parts:
        h.update(part.encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def _first(doc: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if doc.get(k) not in (None, ""):
            return doc[k]
    return None


def _list(doc: dict[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    return value if isinstance(value, list) else []


def _parse_vllm_like(path: Path, label: str, doc: dict[str, Any]) -> Point:
    """vllm bench serve JSON or one SGLang bench_serving JSONL line (same per-request lists)."""
    sglang = "total_output_tokens_retokenized" in doc or "accept_length" in doc
    point = Point(
        source=str(path), label=label, fmt="sglang" if sglang else "vllm", warmup_is_first=True
    )
    point.concurrency = _num(doc.get("max_concurrency"))
    rate = doc.get("request_rate")
    point.request_rate = None if rate in ("inf", None) else _num(rate)
    if point.request_rate is not None and math.isinf(point.request_rate):
        point.request_rate = None
    seed = _first(doc, _SEED_KEYS)
    point.seed = None if seed is None else str(seed)
    point.timeout_s = _num(_first(doc, _TIMEOUT_KEYS))
    point.num_prompts = _int(doc.get("num_prompts"))
    point.completed = _int(doc.get("completed"))
    point.failed = _int(doc.get("failed"))
    point.duration_s = _num(doc.get("duration"))
    point.request_throughput = _num(doc.get("request_throughput"))
    point.output_throughput = _num(doc.get("output_throughput"))
    point.median_ttft_ms = _num(doc.get("median_ttft_ms"))
    for key in ("date", "model_id", "backend", "label", "random_input_len", "dataset_name"):
        if doc.get(key) is not None:
            point.extra[key] = doc[key]
    ttfts = _list(doc, "ttfts")
    input_lens = _list(doc, "input_lens")
    output_lens = _list(doc, "output_lens")
    errors = _list(doc, "errors")
    texts = _list(doc, "generated_texts")
    itls = _list(doc, "itls")
    hashes = _list(doc, "prompt_hashes")
    n = max(len(ttfts), len(input_lens), len(errors))
    for i in range(n):
        err = errors[i] if i < len(errors) and isinstance(errors[i], str) else ""
        ttft = _num(ttfts[i]) if i < len(ttfts) else None
        # vllm and SGLang record a failed request with an error text and ttft 0.0
        success = not err and ttft is not None and ttft > 0
        req = Request(
            index=i,
            input_len=_int(input_lens[i]) if i < len(input_lens) else None,
            output_len=_int(output_lens[i]) if i < len(output_lens) else None,
            ttft_s=ttft if success else None,
            success=success,
            error=err,
        )
        if success and i < len(itls) and isinstance(itls[i], list):
            gaps = [g for g in (_num(x) for x in itls[i]) if g is not None]
            req.latency_s = (ttft or 0.0) + sum(gaps)
        if i < len(hashes) and hashes[i]:
            req.prompt_key, req.key_kind = str(hashes[i]), "prompt"
        elif success and i < len(texts) and isinstance(texts[i], str) and texts[i].strip():
            req.prompt_key = _digest(str(req.input_len), texts[i])
            req.key_kind = "output"
        point.requests.append(req)
    # A greedy output identifies its prompt only if it is distinctive: degenerate outputs
    # ("the the the ...") repeat across different prompts, so repeated ones are not used.
    counts: dict[str, int] = {}
    for req in point.requests:
        if req.key_kind == "output" and req.prompt_key:
            counts[req.prompt_key] = counts.get(req.prompt_key, 0) + 1
    for req in point.requests:
        if req.key_kind == "output" and req.prompt_key and counts[req.prompt_key] > 1:
            req.prompt_key, req.key_kind = None, ""
    return point


def _parse_aiperf(path: Path, records: list[dict[str, Any]]) -> Point:
    """AIPerf profile_export.jsonl: one record per request, metrics as {value, unit}."""
    point = Point(source=str(path), label=path.name, fmt="aiperf")
    rows: list[tuple[int, Request]] = []
    for n, rec in enumerate(records):
        meta = rec.get("metadata") or {}
        metrics = rec.get("metrics") or {}
        if meta.get("benchmark_phase") not in (None, "profiling"):
            continue

        def metric(name: str, metrics: dict[str, Any] = metrics) -> float | None:
            m = metrics.get(name)
            if isinstance(m, dict):
                value = _num(m.get("value"))
                unit = str(m.get("unit", ""))
                if value is not None and unit == "ms":
                    return value / 1000.0
                if value is not None and unit == "ns":
                    return value / 1e9
                return value
            return None

        error = rec.get("error")
        err = ""
        if isinstance(error, dict):
            err = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
        elif error:
            err = str(error)
        ttft = metric("time_to_first_token")
        isl = metric("input_sequence_length") or metric("error_isl")
        req = Request(
            index=0,
            input_len=int(isl) if isl else None,
            output_len=_int(metric("output_sequence_length")),
            ttft_s=ttft if not err else None,
            latency_s=metric("request_latency"),
            success=not err and ttft is not None,
            error=err,
        )
        conv = meta.get("conversation_id")
        if conv:
            req.prompt_key = _digest(str(conv), str(meta.get("turn_index", 0)))
            req.key_kind = "prompt"
        order = _int(meta.get("request_start_ns")) or n
        rows.append((order, req))
    rows.sort(key=lambda x: x[0])
    for i, (_, req) in enumerate(rows):
        req.index = i
        point.requests.append(req)
    return point


def _parse_genai_perf(path: Path, doc: dict[str, Any]) -> list[Point]:
    """GenAI-Perf profile_export.json: experiments[].requests[] with ns timestamps."""
    points = []
    experiments = [e for e in doc["experiments"] if isinstance(e, dict)]
    for k, exp in enumerate(experiments):
        info = exp.get("experiment") or {}
        label = path.name if len(experiments) == 1 else f"{path.name}#{k}"
        point = Point(source=str(path), label=label, fmt="genai-perf")
        if info.get("mode") == "concurrency":
            point.concurrency = _num(info.get("value"))
        elif info.get("mode") == "request_rate":
            point.request_rate = _num(info.get("value"))
        reqs = [r for r in exp.get("requests", []) if isinstance(r, dict)]
        reqs.sort(key=lambda r: _num(r.get("timestamp")) or 0.0)
        for i, r in enumerate(reqs):
            start = _num(r.get("timestamp"))
            raw = r.get("response_timestamps", [])
            stamps = [s for s in (_num(x) for x in raw) if s is not None]
            req = Request(index=i)
            if start is not None and stamps:
                req.ttft_s = (stamps[0] - start) / 1e9
                req.latency_s = (stamps[-1] - start) / 1e9
            else:
                req.success, req.error = False, "no response"
            payload = r.get("request_inputs")
            if payload:
                req.prompt_key = _digest(json.dumps(payload, sort_keys=True))
                req.key_kind = "prompt"
            point.requests.append(req)
        points.append(point)
    return points


def _parse_guidellm(path: Path, doc: dict[str, Any]) -> list[Point]:
    """GuideLLM benchmarks.json: one benchmark per strategy / rate of a sweep."""
    points = []
    benches = [b for b in doc["benchmarks"] if isinstance(b, dict)]
    for k, bench in enumerate(benches):
        label = path.name if len(benches) == 1 else f"{path.name}#{k}"
        point = Point(source=str(path), label=label, fmt="guidellm")
        strategy = (bench.get("args") or {}).get("strategy") or {}
        if isinstance(strategy, dict):
            point.concurrency = _num(strategy.get("streams") or strategy.get("max_concurrency"))
            point.request_rate = _num(strategy.get("rate"))
            point.extra["strategy"] = strategy.get("type_")
        groups = bench.get("requests") or {}
        rows: list[tuple[float, Request]] = []
        for status in ("successful", "errored", "incomplete"):
            for r in groups.get(status) or []:
                if not isinstance(r, dict):
                    continue
                start = _num(r.get("start_time")) or 0.0
                first = _num(r.get("first_token_time"))
                ttft_ms = _num(r.get("time_to_first_token_ms"))
                ttft = (
                    ttft_ms / 1000.0
                    if ttft_ms is not None
                    else (first - start if first is not None and start else None)
                )
                end = _num(r.get("end_time"))
                req = Request(
                    index=0,
                    input_len=_int(r.get("prompt_tokens")),
                    output_len=_int(r.get("output_tokens")),
                    ttft_s=ttft if status == "successful" else None,
                    latency_s=(end - start) if end is not None and start else None,
                    success=status == "successful",
                    error="" if status == "successful" else str(r.get("error") or status),
                )
                prompt = r.get("prompt")
                if isinstance(prompt, str) and prompt:
                    req.prompt_key, req.key_kind = _digest(prompt), "prompt"
                rows.append((start, req))
        rows.sort(key=lambda x: x[0])
        for i, (_, req) in enumerate(rows):
            req.index = i
            point.requests.append(req)
        totals = bench.get("request_totals") or {}
        point.completed = _int(totals.get("successful"))
        if point.completed is not None:
            point.failed = (_int(totals.get("errored")) or 0) + (
                _int(totals.get("incomplete")) or 0
            )
        points.append(point)
    return points


# Plain CSV: one row per request. Recognised column names (case-insensitive, first match wins).
CSV_COLUMNS: dict[str, tuple[str, ...]] = {
    "point": ("point", "grid_point", "run", "run_id", "label", "config"),
    "input_len": ("input_len", "input_tokens", "prompt_tokens", "prompt_len", "isl"),
    "output_len": ("output_len", "output_tokens", "completion_tokens", "osl"),
    "ttft_s": ("ttft_s", "ttft", "time_to_first_token_s"),
    "ttft_ms": ("ttft_ms", "time_to_first_token_ms"),
    "latency_s": ("latency_s", "latency", "e2e_latency_s", "e2el_s"),
    "success": ("success", "ok", "succeeded"),
    "error": ("error", "errors", "error_message"),
    "prompt_key": ("prompt_hash", "prompt_sha", "prompt_id", "prompt_sha256"),
    "seed": ("seed", "prompt_seed", "random_seed"),
    "concurrency": ("concurrency", "max_concurrency"),
    "timeout_s": ("timeout_s", "timeout", "client_timeout"),
}
_FALSE = {"0", "false", "no", "n", "failed", "error"}


def _parse_csv(path: Path, text: str) -> Point:
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise BenchInputError(f"{path}: empty CSV")
    names = {k.strip().lower(): k for k in rows[0] if k}
    cols = {
        field: next((names[c] for c in cands if c in names), None)
        for field, cands in CSV_COLUMNS.items()
    }
    if cols["ttft_s"] is None and cols["ttft_ms"] is None:
        names_s = ", ".join(CSV_COLUMNS["ttft_s"] + CSV_COLUMNS["ttft_ms"])
        raise BenchInputError(f"{path}: CSV has no TTFT column ({names_s})")
    point = Point(source=str(path), label=path.name, fmt="csv")

    def get(row: dict[str, str], field: str) -> str:
        col = cols[field]
        return (row.get(col) or "").strip() if col else ""

    for i, row in enumerate(rows):
        ttft = _num(get(row, "ttft_s"))
        if ttft is None and (ms := _num(get(row, "ttft_ms"))) is not None:
            ttft = ms / 1000.0
        err = get(row, "error")
        ok_text = get(row, "success").lower()
        success = (ok_text not in _FALSE if ok_text else not err) and ttft is not None and ttft > 0
        req = Request(
            index=i,
            input_len=_int(get(row, "input_len")),
            output_len=_int(get(row, "output_len")),
            ttft_s=ttft if success else None,
            latency_s=_num(get(row, "latency_s")),
            success=success,
            error=err or ("" if success else "failed"),
        )
        if key := get(row, "prompt_key"):
            req.prompt_key, req.key_kind = key, "prompt"
        meta = {
            "point": get(row, "point"),
            "seed": get(row, "seed"),
            "concurrency": _num(get(row, "concurrency")),
            "timeout_s": _num(get(row, "timeout_s")),
        }
        point.extra.setdefault("row_meta", {})[i] = meta
        point.requests.append(req)
    metas = list(point.extra.get("row_meta", {}).values())
    _apply_meta(point, metas)
    return point


def _apply_meta(point: Point, metas: list[dict[str, Any]]) -> None:
    for meta in metas:
        if point.seed is None and meta["seed"]:
            point.seed = str(meta["seed"])
        if point.concurrency is None and meta["concurrency"] is not None:
            point.concurrency = meta["concurrency"]
        if point.timeout_s is None and meta["timeout_s"] is not None:
            point.timeout_s = meta["timeout_s"]


def split_csv_points(points: list[Point]) -> list[Point]:
    """A CSV with a `point` column holds several grid points: one Point per value, in file order."""
    out: list[Point] = []
    for p in points:
        row_meta: dict[int, dict[str, Any]] = p.extra.pop("row_meta", {})
        if p.fmt != "csv" or not any(m["point"] for m in row_meta.values()):
            out.append(p)
            continue
        groups: dict[str, Point] = {}
        for req in p.requests:
            meta = row_meta.get(
                req.index, {"point": "", "seed": "", "concurrency": None, "timeout_s": None}
            )
            name = meta["point"]
            sub = groups.get(name)
            if sub is None:
                sub = groups[name] = Point(source=p.source, label=f"{p.label}#{name}", fmt="csv")
                sub.extra["csv_rows"] = []
                sub.extra["metas"] = []
            sub.extra["csv_rows"].append(req.index)
            sub.extra["metas"].append(meta)
            req.index = len(sub.requests)
            sub.requests.append(req)
        for sub in groups.values():
            _apply_meta(sub, sub.extra.pop("metas"))
            out.append(sub)
    for i, p in enumerate(out):
        p.order = i
    return out


_TIMEOUT_TEXT = re.compile(
    r"(?:read timeout=|timeout=|timed out after |Timeout of |total=)(?P<s>[0-9]+(?:\.[0-9]+)?)"
)
_TIMEOUT_WORDS = re.compile(
    r"time(?:d)? ?out|TimeoutError|ReadTimeout|APITimeoutError|504 Gateway", re.IGNORECASE
)


def timeout_in(error: str) -> tuple[bool, float | None]:
    """Whether an error text is a client timeout, and the timeout in seconds when it says."""
    if not error or not _TIMEOUT_WORDS.search(error):
        return False, None
    m = _TIMEOUT_TEXT.search(error)
    return True, float(m.group("s")) if m else None
