"""Read facts off the input: engine and versions, GPU, launch arguments, model, memory figures.

Facts come from fact-pattern hits found by the same single scan as the signatures (see
`FACT_PATTERNS`); this module only turns hits into a dict. Facts feed applicability (version
ranges), differential diagnosis (e.g. `data_parallel_size > 1`) and the report.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from triage.models import Hit

# A comparable version: (release, pre-release, post, dev), ordered as PEP 440 orders versions.
VersionKey = tuple[tuple[int, ...], tuple[int, int], int, tuple[int, int]]

# (fact name, regex). The first capture group named `v` (or the named groups) holds the value.
FACT_PATTERNS: tuple[tuple[str, str], ...] = (
    # keep-sorted start
    ("available_kv_gib", r"Available KV cache memory: (?P<v>-?[0-9.]+) ?GiB"),
    (
        "cuda_version",
        r"CUDA (?:used to build PyTorch|Version|runtime version)\s*:?\s*(?P<v>[0-9]+\.[0-9]+)",
    ),
    (
        "driver_version",
        r"(?:Driver Version|Nvidia driver version|NVIDIA UNIX x86_64 Kernel Module)\s*:?\s+(?P<v>[0-9]{3}\.[0-9]+(?:\.[0-9]+)?)",
    ),
    ("gpu", r"GPU \d+: (?P<v>NVIDIA [A-Za-z0-9][\w -]{0,40}\w)"),
    ("gpu", r"(?:Device name|device_name|GPU model)\s*[:=]\s*'?(?P<v>NVIDIA [\w -]{2,40}?)['\s,]"),
    ("gpu_memory_utilization", r"gpu_memory_utilization['\"]?\s*[:=]\s*(?P<v>[0-9.]+)"),
    ("kv_cache_tokens", r"GPU KV cache size: (?P<v>[0-9,]+) tokens"),
    # an engine start banner: each begins a launch (see `launch_starts`)
    ("launch_banner", r"(?P<v>vLLM API server version [0-9]|server_args=ServerArgs\()"),
    ("launch_args", r"non-default args: (?P<v>\{.*\})"),
    ("launch_namespace", r"args: Namespace\((?P<v>.*)\)"),
    # launchers and wrappers that build the engine's arguments or drive it (their frames, paths or
    # banners): an argument error they cause lives in the harness
    ("launcher", r"/(?P<v>runpod)/serverless/|/(?P<v2>runpod-volume)/|(?P<v3>worker-vllm)"),
    ("launcher", r"(?P<v>modal)/_(?:runtime|container_entrypoint|utils)/?"),
    (
        "launcher",
        r"(?P<v>_pytest)/[a-z_]+\.py|(?P<v2>pytest)-[0-9]+\.[0-9]+|platform linux -- Python [0-9.]+, (?P<v3>pytest)",
    ),
    (
        "launcher",
        r"(?P<v>buildkite)-agent|BUILDKITE_[A-Z_]+=|(?P<v2>lm_eval)/models/|(?P<v3>lmms_eval)/models/",
    ),
    (
        "launcher",
        r"(?P<v>llama-swap)\b|(?P<v2>trl)/scripts/vllm_serve\.py|(?P<v3>openrlhf)/|/(?P<v4>verl)/workers/",
    ),
    ("max_model_len", r"max_seq_len=(?P<v>[0-9]+)"),
    (
        "model",
        r"Initializing an? (?:V[01] )?LLM engine \(v[^)]*\) with config: model='(?P<v>[^']{1,200})'",
    ),
    ("model", r"Load weight end\. type=(?P<v>\w+)"),
    ("model_loading_gib", r"Model loading took (?P<v>[0-9.]+) ?(?:GiB|GB)"),
    ("model_loading_gib", r"Loading model weights took (?P<v>[0-9.]+) ?(?:GiB|GB)"),
    ("nccl_version", r"NCCL version (?P<v>[0-9]+\.[0-9]+\.[0-9]+)"),
    ("ready", r"(?P<v>Application startup complete|The server is fired up and ready to roll)"),
    ("sglang_version", r"sglang(?:==|\s+version\s*:?\s*|: )(?P<v>[0-9]+\.[0-9]+\.[0-9]+\S*)"),
    (
        "torch_version",
        r"(?:PyTorch version|torch==|torch version)\s*:?\s*(?P<v>[0-9]+\.[0-9]+\.[0-9]+)",
    ),
    ("vllm_version", r"vLLM API server version (?P<v>[0-9][0-9A-Za-z.+-]*)"),
    ("vllm_version", r"LLM engine \(v(?P<v>[0-9][0-9A-Za-z.+-]*)\)"),
    ("vllm_version", r"vLLM Version: (?P<v>[0-9][0-9A-Za-z.+-]*)"),
    ("vllm_version", r"vllm==(?P<v>[0-9][0-9A-Za-z.+-]*)"),
    # keep-sorted end
)

# The periodic stats line: one per 10 s per engine, so it is scanned only when a time series is
# wanted (run directories, benchmarks: RunOptions(stats=True)), not on every triage.
STATS_PATTERN = (
    "stats",
    r"Avg prompt throughput: (?P<prompt_tps>[0-9.]+) tokens/s, Avg generation throughput: (?P<gen_tps>[0-9.]+) tokens/s",
)

_STATS_FIELDS = re.compile(
    r"(?P<key>Running|Waiting|Swapped|Pending|GPU KV cache usage|Prefix cache hit rate|CPU KV cache usage)"
    r": (?P<value>[0-9.]+)"
)
_NAMESPACE_ITEM = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|[^,()]+)")

# Launch arguments worth surfacing as first-class facts.
_ARG_FACTS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_cache_dtype",
    "quantization",
    "dtype",
    "attention_backend",
    "enforce_eager",
    "model",
    "speculative_config",
    "cpu_offload_gb",
    "kv_offloading_size",
    "tp_size",
    "dp_size",
    "mem_fraction_static",
)


def _parse_args_dict(text: str) -> dict[str, Any]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _parse_namespace(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in _NAMESPACE_ITEM.findall(text):
        raw = raw.strip()
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def collect_facts(hits: Iterable[Hit]) -> dict[str, Any]:
    """Turn fact hits (first occurrence wins, except time series) into the report's facts."""
    facts: dict[str, Any] = {}
    stats: list[dict[str, Any]] = []
    for hit in hits:
        name = hit.signature
        caps = hit.captures
        if name == "stats":
            row: dict[str, Any] = {"input": hit.line.input, "line": hit.line.number}
            for key in ("prompt_tps", "gen_tps"):
                if key in caps:
                    row[key] = float(caps[key])
            for m in _STATS_FIELDS.finditer(hit.line.text):
                row[m.group("key").lower().replace(" ", "_")] = float(m.group("value"))
            stats.append(row)
            continue
        if name == "launch_banner":
            continue  # launches: see `launch_starts`
        if name == "launcher":
            found = [v for _, v in sorted(caps.items()) if v]
            facts.setdefault("launcher", found[0] if found else "buildkite")
            continue
        value = caps.get("v")
        if value is None:
            continue
        if name == "launch_args":
            args = _parse_args_dict(value)
            if args and "launch_args" not in facts:
                facts["launch_args"] = args
            continue
        if name == "launch_namespace":
            args = _parse_namespace(value)
            if args and "launch_args" not in facts:
                facts["launch_args"] = args
            continue
        if name in ("model_loading_gib", "available_kv_gib", "gpu_memory_utilization"):
            with contextlib.suppress(ValueError):
                facts.setdefault(name, float(value))
            continue
        if name == "kv_cache_tokens":
            facts.setdefault(name, int(value.replace(",", "")))
            continue
        if name == "ready":
            facts.setdefault("ready_line", {"input": hit.line.input, "line": hit.line.number})
            continue
        facts.setdefault(name, value.strip())
    launch = facts.get("launch_args")
    if isinstance(launch, dict):
        for key in _ARG_FACTS:
            if key in launch and key not in facts:
                value = launch[key]
                facts[key] = value if isinstance(value, (int, float, str, bool)) else str(value)
        if "model" not in facts and isinstance(launch.get("model_tag"), str):
            facts["model"] = launch["model_tag"]
    if stats:
        facts["stats"] = stats
    if "vllm_version" in facts:
        facts["engine"] = "vllm"
    elif "sglang_version" in facts:
        facts["engine"] = "sglang"
    return facts


# Banners closer than this belong to one launch (several API server processes, DP ranks).
LAUNCH_MERGE_LINES = 50


def launch_starts(hits: Iterable[Hit]) -> dict[str, list[int]]:
    """Per input, the first line of each launch after the first: an engine start banner (vLLM's
    'vLLM API server version', SGLang's 'server_args=ServerArgs(') begins one. An input with
    fewer than two banners is one launch (an empty list)."""
    banners: dict[str, list[int]] = {}
    for hit in hits:
        if hit.signature == "launch_banner":
            lines = banners.setdefault(hit.line.input, [])
            if not lines or hit.line.number - lines[-1] > LAUNCH_MERGE_LINES:
                lines.append(hit.line.number)
    return {name: lines for name, lines in banners.items() if len(lines) > 1}


def launch_index(starts: list[int], line: int) -> int:
    """Which launch of an input a line belongs to (0: before or in the first)."""
    return bisect.bisect_right(starts, line) - 1 if starts and line >= starts[0] else 0


_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
_TS_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)")
_TS_MONTH_DAY = re.compile(r"^(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")  # vLLM: no year
_TS_SYSLOG = re.compile(r"([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(?: (\d{4}))?")


Stamp = tuple[int | None, int, int, int, int, int]  # (year or None, month, day, h, m, s)


def parse_timestamp(text: str | None) -> Stamp | None:
    """A wrapper's timestamp as calendar fields: ISO 8601, vLLM's 'MM-DD HH:MM:SS' (no year),
    syslog 'Mon DD HH:MM:SS' (no year) and dmesg -T ctime. None for what cannot be placed on a
    calendar (dmesg's seconds since boot)."""
    if not text:
        return None
    m = _TS_ISO.search(text)
    if m:
        year, month, day, hh, mm, ss = (int(x) for x in m.groups())
        return year, month, day, hh, mm, ss
    m = _TS_MONTH_DAY.match(text)
    if m:
        month, day, hh, mm, ss = (int(x) for x in m.groups())
        return None, month, day, hh, mm, ss
    m = _TS_SYSLOG.search(text)
    if m and m.group(1) in _MONTHS:
        stated = int(m.group(6)) if m.group(6) else None
        day, hh, mm, ss = (int(x) for x in m.groups()[1:5])
        return stated, _MONTHS[m.group(1)], day, hh, mm, ss
    return None


def seconds_apart(a: Stamp, b: Stamp) -> float | None:
    """How far apart two timestamps are; a missing year is taken from the other one (2000, a
    leap year, when both lack it). None when a field is out of range."""
    year = a[0] if a[0] is not None else b[0] if b[0] is not None else 2000
    try:
        first = datetime(a[0] if a[0] is not None else year, *a[1:])
        second = datetime(b[0] if b[0] is not None else year, *b[1:])
    except ValueError:
        return None
    return abs((first - second).total_seconds())


_VERSION = re.compile(r"([0-9]+(?:\.[0-9]+)*)((?:(?:rc|a|b|\.dev|\.post)[0-9]+)*)")
_VERSION_SUFFIX = re.compile(r"(rc|a|b|\.dev|\.post)([0-9]+)")
_PRE_RELEASE = {"a": 0, "b": 1, "rc": 2}
_FINAL = (3, 0)  # after every pre-release of the same release


def parse_version(text: str) -> VersionKey | None:
    """A comparable version from text like '0.11.0rc2.dev98+g393de22d2' or '12.4': the release
    numbers (trailing zeros dropped, so 12.4 == 12.4.0), then PEP 440's order of the suffixes:
    X.devN < X.aN < X.bN < X.rcN < X < X.postN, a .devN just before what it is a dev of. (Not
    packaging.Version: its pattern costs more to compile than a run on a short log takes.)"""
    found = _VERSION.match(text.strip())
    if not found:
        return None
    release = tuple(int(n) for n in found.group(1).split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    pre: tuple[int, int] | None = None
    post: int | None = None
    dev: int | None = None
    for kind, number in _VERSION_SUFFIX.findall(found.group(2)):
        if kind == ".post":
            post = int(number)
        elif kind == ".dev":
            dev = int(number)
        else:
            pre = (_PRE_RELEASE[kind], int(number))
    if pre is None:
        pre = (-1, 0) if dev is not None and post is None else _FINAL
    return (release, pre, -1 if post is None else post, (1, 0) if dev is None else (0, dev))


_CONDITION = re.compile(r"^(==|!=|>=|<=|>|<|~)\s*(.+)$")


def fact_value(facts: dict[str, Any], key: str) -> Any:
    if key in facts:
        return facts[key]
    args = facts.get("launch_args")
    if isinstance(args, dict):
        return args.get(key)
    return None


def condition_holds(facts: dict[str, Any], key: str, condition: str) -> bool | None:
    """Evaluate a differential fact condition; None when the fact is unknown."""
    value = fact_value(facts, key)
    condition = condition.strip()
    if condition == "present":
        return value is not None
    if condition == "absent":
        return value is None
    if value is None:
        return None
    m = _CONDITION.match(condition)
    if not m:
        return None
    op, want = m.group(1), m.group(2).strip()
    if op == "~":
        return re.search(want, str(value)) is not None
    try:
        left, right = float(value), float(want)
    except (TypeError, ValueError):
        left_s, right_s = str(value), want
        return {"==": left_s == right_s, "!=": left_s != right_s}.get(op)
    return {
        "==": left == right,
        "!=": left != right,
        ">=": left >= right,
        "<=": left <= right,
        ">": left > right,
        "<": left < right,
    }[op]
