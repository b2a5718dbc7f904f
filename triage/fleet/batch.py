"""Batch triage over an archive: one row per input file, on Ray Data or serially, plus a summary.

The job: expand the paths as `triage DIR` would (the same log-like files), read every file whole
(`ray.data.read_binary_files(..., include_paths=True)`: never split into lines, since a diagnosis
needs the whole log), triage each in a worker that loaded the knowledge base and compiled its
pattern database once (a callable class under `map_batches`, one actor per worker), and write:

- `rows.jsonl`: one JSON object per input, in input order (`triage.batch-row/1`, see `ROW_SCHEMA`);
- `rows.parquet`: the same rows when pyarrow is installed (it comes with `ray[data]`);
- `summary.json`: counts per signature and per layer, the largest unknown clusters across files.

`--local` runs the very same per-file function in this process, file after file: the reference
the Ray run is tested against, and the way to run it without Ray. `triage history import` loads
the rows into the history database.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from triage.api import Engine, InputSpec, RunOptions
from triage.models import Report
from triage.read import InputError, expand_inputs

ROW_SCHEMA = "triage.batch-row/1"
SUMMARY_SCHEMA = "triage.batch-summary/1"
RAY_MISSING = (
    "triage batch needs Ray: pip install 'llm-triage[ray]' (from a clone: pip install '.[ray]'), "
    "or run it serially with --local"
)


class BatchError(Exception):
    """The batch cannot run (no Ray, no inputs); the message says what to do."""


@dataclass(frozen=True)
class EngineSpec:
    """What every worker needs to build the same engine as a serial `triage` run (picklable)."""

    signatures: str | None = None
    kb_path: str | None = None
    scanner: str | None = None
    max_decompressed: int = 4096 << 20


def build_engine(spec: EngineSpec) -> tuple[Engine, str]:
    """The engine facade over the current knowledge base (compiled store when current), and the
    knowledge base's digest for the rows."""
    from triage.kb.store import load_current

    kb = load_current(
        Path(spec.signatures) if spec.signatures else None,
        Path(spec.kb_path) if spec.kb_path else None,
    )
    options = RunOptions(engine=spec.scanner, max_decompressed=spec.max_decompressed)
    return Engine(kb, options), kb.digest


def expand(paths: Sequence[str]) -> list[str]:
    """The files `triage PATHS...` would read, named as it names them (stdin is refused)."""
    if not paths:
        raise BatchError("give at least one file or directory")
    if "-" in paths:
        raise BatchError("batch reads files and directories, not stdin")
    try:
        return [name for name, _ in expand_inputs(list(paths))]
    except InputError as exc:
        raise BatchError(str(exc)) from None


# -- one row per input ---------------------------------------------------------------------------


def row_from_report(name: str, report: Report, kb_digest: str) -> dict[str, Any]:
    """The row of one input: its report without what the knowledge base already holds (fixes,
    references, verify steps): those are one `triage kb show SIGNATURE` away."""
    info = report.inputs[0] if report.inputs else None
    return {
        "schema": ROW_SCHEMA,
        "path": name,
        "bytes": info.bytes if info else 0,
        "lines": info.lines if info else 0,
        "format": info.format if info else None,
        "digest": info.digest if info else None,
        "mtime": _mtime(name),
        "failed": report.failed,
        "engine": report.engine,
        "kb_digest": kb_digest,
        "facts": report.facts,
        "hypotheses": [
            {
                "rank": h.rank,
                "signature": h.signature,
                "title": h.title,
                "layer": h.layer,
                "severity": h.severity,
                "status": h.status,
                "score": h.score,
                "basis": h.basis,
                "evidence": [
                    {"line": e.line, "text": e.text, "role": e.role, "count": e.count}
                    for e in h.evidence
                ],
                "explains": [e.signature for e in h.explains],
            }
            for h in report.hypotheses
        ],
        "unrecognized": [
            {"line": u.line, "text": u.text, "fingerprint": u.fingerprint, "count": u.count}
            for u in report.unrecognized
        ],
        "skipped": [s["reason"] for s in report.skipped],
        "error": None,
    }


def error_row(name: str, message: str, kb_digest: str) -> dict[str, Any]:
    """An input that could not be triaged still gets its row, so no file goes missing silently."""
    return {
        "schema": ROW_SCHEMA,
        "path": name,
        "bytes": 0,
        "lines": 0,
        "format": None,
        "digest": None,
        "mtime": _mtime(name),
        "failed": False,
        "engine": "",
        "kb_digest": kb_digest,
        "facts": {},
        "hypotheses": [],
        "unrecognized": [],
        "skipped": [],
        "error": message,
    }


def _mtime(name: str) -> float | None:
    """When the log was last written, if it is a local file (the history's time axis); None for
    object-store paths."""
    try:
        return os.stat(name).st_mtime
    except OSError:
        return None


class FileTriage:
    """Triage whole files given as bytes, with one engine built once.

    Each file's bytes are spooled to a private temporary file and triaged by path: the serial run
    reads a path, and only a re-readable plain file gets the rescan that recovers a signature's
    supporting lines after its bounded queue overflowed (see `triage.match.Matcher`). Triaging a
    stream instead would make the rows depend on how the file was read.
    """

    def __init__(self, spec: EngineSpec) -> None:
        self.engine, self.kb_digest = build_engine(spec)
        shm = Path("/dev/shm")
        self._spool_dir = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None

    def triage(self, name: str, data: bytes) -> dict[str, Any]:
        with tempfile.NamedTemporaryFile(
            prefix="triage-batch-", dir=self._spool_dir, delete=True
        ) as spool:
            spool.write(data)
            spool.flush()
            try:
                report = self.engine.run_inputs([InputSpec(name, Path(spool.name))], strict=True)
            except InputError as exc:
                return error_row(name, str(exc).replace(spool.name, name), self.kb_digest)
        if all(i.lines == 0 for i in report.inputs):
            return error_row(name, "empty input: nothing to triage", self.kb_digest)
        return row_from_report(name, report, self.kb_digest)


class RayFileTriage:
    """The `map_batches` callable: Ray Data makes one per actor, so the knowledge base is loaded
    and the pattern database compiled once per worker, not once per file."""

    def __init__(self, spec: EngineSpec) -> None:
        self.worker = FileTriage(spec)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        rows = [
            json.dumps(self.worker.triage(str(path), bytes(data)), ensure_ascii=False)
            for path, data in zip(batch["path"], batch["bytes"], strict=True)
        ]
        return {"path": np.asarray(batch["path"], dtype=object), "row": np.asarray(rows)}


# -- the runs ------------------------------------------------------------------------------------


@dataclass
class BatchResult:
    rows: int
    bytes: int
    seconds: float  # from the first file read to the last row written
    startup_seconds: float  # Ray's start (or connection), and the driver's knowledge base load
    mode: str  # "ray" | "local"
    workers: int
    files: list[str] = field(default_factory=list)  # what was written


def run_local(files: Sequence[str], spec: EngineSpec) -> Iterator[dict[str, Any]]:
    """The serial loop: the same per-file function, in this process."""
    worker = FileTriage(spec)
    for name in files:
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            yield error_row(name, f"{name}: cannot read: {exc.strerror}", worker.kb_digest)
            continue
        yield worker.triage(name, data)


def start_ray(workers: int, address: str | None) -> tuple[float, bool]:
    """Start a local Ray (workers CPUs, no dashboard) or join the cluster at `address`; returns
    the seconds it took and whether this call started it (then `run_batch` shuts it down)."""
    try:
        import ray
    except ImportError:
        raise BatchError(RAY_MISSING) from None
    began = time.perf_counter()
    if ray.is_initialized():
        return 0.0, False
    if address:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    return time.perf_counter() - began, True


def run_ray(files: Sequence[str], spec: EngineSpec, workers: int) -> Iterator[dict[str, Any]]:
    """Rows from Ray Data: whole files read by `read_binary_files`, triaged by a fixed pool of
    `workers` actors, one file per batch (a file's bytes are one object; batching more files
    per call only raises peak memory), returned in input order."""
    import ray.data

    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # rows.jsonl in input order, run after run
    context.enable_progress_bars = False
    # Reading reserves no CPU: the workers hold every CPU, and a read task that waits for one
    # would wait for ever (Ray Data's budget gives it none while the actor pool holds them all).
    # Tasks that need no CPU are not limited by the CPU count, so their number is capped here:
    # uncapped, Ray started one worker process per pending read (58 processes seen on 2 cores).
    reads = ray.data.read_binary_files(
        list(files), include_paths=True, num_cpus=0, concurrency=workers
    )
    dataset = reads.map_batches(
        RayFileTriage,
        fn_constructor_args=(spec,),
        compute=ray.data.ActorPoolStrategy(size=workers),
        batch_size=1,
        batch_format="numpy",
        num_cpus=1,
    )
    for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
        for text in batch["row"]:
            yield json.loads(str(text))


def write_outputs(
    rows: Iterable[dict[str, Any]], out: Path, expected: Sequence[str], top: int = 20
) -> tuple[int, int, list[str]]:
    """Write rows.jsonl as rows arrive, then rows.parquet (when pyarrow is there) and
    summary.json. Returns (rows, bytes, files written). Every expected input must have come back
    exactly once: a missing or repeated row is an error, not a shorter archive."""
    out.mkdir(parents=True, exist_ok=True)
    summary = Summary(top=top)
    seen: Counter[str] = Counter()
    jsonl = out / "rows.jsonl"
    kept: list[dict[str, Any]] = []
    with _atomic(jsonl) as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
            seen[row["path"]] += 1
            summary.add(row)
            kept.append(_parquet_row(row))
    missing = [p for p in expected if seen[p] == 0]
    repeated = [p for p, n in seen.items() if n > 1]
    if missing or repeated:
        raise BatchError(
            f"{len(missing)} inputs without a row, {len(repeated)} with several "
            f"(first: {(missing or repeated)[0]})"
        )
    written = [str(jsonl)]
    parquet = _write_parquet(kept, out / "rows.parquet")
    if parquet:
        written.append(parquet)
    summary_path = out / "summary.json"
    with _atomic(summary_path) as fh:
        fh.write(json.dumps(summary.to_json_dict(), indent=2, ensure_ascii=False) + "\n")
    written.append(str(summary_path))
    return summary.files, summary.bytes, written


class _atomic:
    """A text file written beside its final name and renamed into place when complete."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.fh: IO[str] | None = None

    def __enter__(self) -> IO[str]:
        self.fh = open(self.tmp, "w", encoding="utf-8")  # closed in __exit__
        return self.fh

    def __exit__(self, kind: object, *_: object) -> None:
        assert self.fh is not None
        self.fh.close()
        if kind is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def _parquet_row(row: dict[str, Any]) -> dict[str, Any]:
    """Flat columns for the columnar copy; nested lists kept as structs, facts as JSON text (their
    keys differ from log to log)."""
    top = row["hypotheses"][0] if row["hypotheses"] else None
    return {
        "path": row["path"],
        "bytes": row["bytes"],
        "lines": row["lines"],
        "format": row["format"],
        "digest": row["digest"],
        "mtime": row["mtime"],
        "failed": row["failed"],
        "top_signature": top["signature"] if top else None,
        "top_layer": top["layer"] if top else None,
        "top_severity": top["severity"] if top else None,
        "top_score": top["score"] if top else None,
        "signatures": [h["signature"] for h in row["hypotheses"]],
        "layers": [h["layer"] for h in row["hypotheses"]],
        "fingerprints": [u["fingerprint"] for u in row["unrecognized"]],
        "hypotheses": json.dumps(row["hypotheses"], ensure_ascii=False),
        "unrecognized": json.dumps(row["unrecognized"], ensure_ascii=False),
        "facts": json.dumps(row["facts"], ensure_ascii=False, default=str),
        "error": row["error"],
    }


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> str | None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    text, number, listed = pa.string(), pa.float64(), pa.list_(pa.string())
    schema = pa.schema(
        [
            ("path", text),
            ("bytes", pa.int64()),
            ("lines", pa.int64()),
            ("format", text),
            ("digest", text),
            ("mtime", number),
            ("failed", pa.bool_()),
            ("top_signature", text),
            ("top_layer", text),
            ("top_severity", text),
            ("top_score", number),
            ("signatures", listed),
            ("layers", listed),
            ("fingerprints", listed),
            ("hypotheses", text),
            ("unrecognized", text),
            ("facts", text),
            ("error", text),
        ]
    )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    os.replace(tmp, path)
    return str(path)


# -- the fleet summary ---------------------------------------------------------------------------


@dataclass
class _Cluster:
    fingerprint: str
    files: int = 0
    lines: int = 0
    example: str = ""
    where: str = ""


@dataclass
class Summary:
    """Counts over all rows: files per signature (top-level or explained) and per layer, and the
    unrecognized fingerprints shared by the most files (exact fingerprints here; the history's
    clustering joins near-identical ones after `triage history import`)."""

    top: int = 20
    files: int = 0
    bytes: int = 0
    failed: int = 0
    errors: int = 0
    with_unknown: int = 0
    silent: int = 0
    signatures: Counter[str] = field(default_factory=Counter)
    top_signatures: Counter[str] = field(default_factory=Counter)
    layers: Counter[str] = field(default_factory=Counter)
    clusters: dict[str, _Cluster] = field(default_factory=dict)

    def add(self, row: dict[str, Any]) -> None:
        self.files += 1
        self.bytes += int(row["bytes"] or 0)
        self.failed += bool(row["failed"])
        self.errors += row["error"] is not None
        hyps = row["hypotheses"]
        if not hyps and not row["unrecognized"] and row["error"] is None:
            self.silent += 1
        fired = {h["signature"] for h in hyps} | {s for h in hyps for s in h["explains"]}
        self.signatures.update(fired)
        if hyps:
            self.top_signatures[hyps[0]["signature"]] += 1
        self.layers.update({h["layer"] for h in hyps})
        if row["unrecognized"]:
            self.with_unknown += 1
        for fp in {u["fingerprint"] for u in row["unrecognized"]}:
            cluster = self.clusters.setdefault(fp, _Cluster(fp))
            cluster.files += 1
        for u in row["unrecognized"]:
            cluster = self.clusters[u["fingerprint"]]
            cluster.lines += int(u["count"])
            if not cluster.example or len(u["text"]) < len(cluster.example):
                cluster.example, cluster.where = u["text"], f"{row['path']}:{u['line']}"

    def to_json_dict(self) -> dict[str, Any]:
        largest = sorted(self.clusters.values(), key=lambda c: (-c.files, -c.lines, c.fingerprint))
        return {
            "schema": SUMMARY_SCHEMA,
            "files": self.files,
            "bytes": self.bytes,
            "failed": self.failed,
            "silent": self.silent,
            "with_unrecognized": self.with_unknown,
            "errors": self.errors,
            "signatures": dict(sorted(self.signatures.items(), key=lambda kv: (-kv[1], kv[0]))),
            "top_signatures": dict(
                sorted(self.top_signatures.items(), key=lambda kv: (-kv[1], kv[0]))
            ),
            "layers": dict(sorted(self.layers.items(), key=lambda kv: (-kv[1], kv[0]))),
            "unknown_clusters": [
                {
                    "fingerprint": c.fingerprint,
                    "files": c.files,
                    "lines": c.lines,
                    "example": c.example,
                    "where": c.where,
                }
                for c in largest[: self.top]
            ],
            "unknown_fingerprints": len(self.clusters),
        }


def run_batch(
    paths: Sequence[str],
    out: Path,
    *,
    local: bool = False,
    workers: int = 2,
    address: str | None = None,
    spec: EngineSpec | None = None,
    top: int = 20,
) -> BatchResult:
    """The whole job: expand, triage every file (Ray or serial), write rows and summary."""
    spec = spec or EngineSpec()
    files = expand(paths)
    startup, started = (0.0, False) if local else start_ray(workers, address)
    began = time.perf_counter()
    try:
        rows = run_local(files, spec) if local else run_ray(files, spec, workers)
        count, size, written = write_outputs(rows, out, files, top=top)
    finally:
        if started:
            import ray

            ray.shutdown()
    return BatchResult(
        rows=count,
        bytes=size,
        seconds=time.perf_counter() - began,
        startup_seconds=startup,
        mode="local" if local else "ray",
        workers=1 if local else workers,
        files=written,
    )
