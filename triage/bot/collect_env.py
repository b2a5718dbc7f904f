"""Parse vLLM's `collect_env.py` output (both layouts) into facts rather than matching it as a log.

Old layout: `Key: value` lines derived from PyTorch's script. New layout (mid-2025 on): banner
sections (`=====` / title / `=====`) with `Key<spaces>: value`. Both may lose indentation or tabs
when pasted; values of some keys continue on the following lines (`GPU models and configuration`,
`cuDNN version`, `vLLM Build Flags`, `GPU Topology`). Secret-looking environment variables are
dropped, and everything kept is redacted.
"""

from __future__ import annotations

import re
from typing import Any

from triage.redact import redact

_KV = re.compile(r"^\s{0,8}([A-Za-z][A-Za-z0-9 ()/._+-]{0,60}?)\s{0,40}:\s{0,40}(.{0,500})$")
_BANNER = re.compile(r"^\s*={5,}\s*$")
_GPU_LINE = re.compile(r"^\s*GPU (\d{1,3}): (.{1,80}?)\s*$")
_PKG = re.compile(r"^\[(pip3?|conda)\]\s+([A-Za-z0-9_.-]{1,80})(?:==|\s+)([0-9][^\s]{0,40})")
_ENV = re.compile(r"^([A-Z][A-Z0-9_]{1,80})=(.{0,300})$")
_VLLM_SHA = re.compile(r"\(git sha: ([0-9a-f]{6,40})\)|\+g([0-9a-f]{6,40})")
_TOPO_ROW = re.compile(r"^\s*GPU(\d{1,3})\s+(.{1,2000})$")
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL|AUTH", re.IGNORECASE)

PLACEHOLDER = re.compile(r"Your output of `?python collect_env\.py`? here", re.IGNORECASE)
SCRIPT_SOURCE = re.compile(
    r"^\s*(?:def get_env_info\(|def get_pretty_env_info\(|SystemEnv = namedtuple)", re.MULTILINE
)

# Key (lower-case, colon-free) -> fact name.
_KEYS = {
    "pytorch version": "torch_version",
    "is debug build": "torch_debug_build",
    "cuda used to build pytorch": "cuda_build",
    "rocm used to build pytorch": "rocm_build",
    "os": "os",
    "gcc version": "gcc",
    "clang version": "clang",
    "cmake version": "cmake",
    "libc version": "libc",
    "python version": "python",
    "python platform": "platform",
    "is cuda available": "cuda_available",
    "cuda runtime version": "cuda_runtime",
    "cuda_module_loading set to": "cuda_module_loading",
    "nvidia driver version": "driver_version",
    "cudnn version": "cudnn",
    "hip runtime version": "hip_runtime",
    "miopen runtime version": "miopen",
    "rocm version": "rocm_version",
    "neuron sdk version": "neuron_sdk",
    "vllm version": "vllm_version",
    "vllm build flags": "vllm_build_flags",
}
_CONTINUED = {
    "gpu models and configuration",
    "cudnn version",
    "vllm build flags",
    "gpu topology",
    "environment variables",
}
_WATCHED_PACKAGES = (
    "torch",
    "transformers",
    "triton",
    "flashinfer",
    "flashinfer-python",
    "vllm",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "numpy",
    "xformers",
    "sglang",
    "pytorch-triton-rocm",
    "lmcache",
    "nixl",
)


def looks_like_collect_env(text: str) -> bool:
    """True when text carries collect_env output (or its placeholder, or the script's source)."""
    hits = sum(
        k in text
        for k in (
            "PyTorch version",
            "vLLM Version",
            "Is CUDA available",
            "Nvidia driver version",
            "GPU models and configuration",
            "Versions of relevant libraries",
            "collect_env",
        )
    )
    return hits >= 2 or bool(PLACEHOLDER.search(text))


def parse_collect_env(text: str) -> dict[str, Any]:
    """Facts from collect_env output. Keys absent from the text are absent from the result.

    Always present: `placeholder` (the template's placeholder left in place), `script_pasted`
    (the script's source instead of its output)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    facts: dict[str, Any] = {
        "placeholder": bool(PLACEHOLDER.search(text)),
        "script_pasted": bool(SCRIPT_SOURCE.search(text)),
    }
    gpus: list[dict[str, Any]] = []
    packages: dict[str, str] = {}
    env: dict[str, str] = {}
    topology: list[str] = []
    current: str | None = None
    for raw in text.split("\n")[:5000]:
        line = raw.rstrip()
        if not line.strip() or _BANNER.match(line):
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            gpus.append({"index": int(gpu.group(1)), "model": gpu.group(2)})
            continue
        pkg = _PKG.match(line.strip())
        if pkg:
            name = pkg.group(2).lower()
            if name in _WATCHED_PACKAGES and name not in packages:
                packages[name] = pkg.group(3)
            continue
        if current == "gpu topology":
            row = _TOPO_ROW.match(line)
            if row:
                topology.append(line.strip())
                continue
            if line.strip().startswith(("Legend", "X ", "GPU0")) or "Affinity" in line:
                continue
        envm = _ENV.match(line.strip())
        if envm:
            if not _SECRET_NAME.search(envm.group(1)):
                env[envm.group(1)] = redact(envm.group(2).strip())
            continue
        kv = _KV.match(line)
        if kv and not kv.group(1).strip().isdigit():
            key = kv.group(1).strip().lower()
            value = kv.group(2).strip()
            if current == "vllm build flags" and key not in _KEYS and key not in _CONTINUED:
                facts["vllm_build_flags"] = (
                    str(facts.get("vllm_build_flags", "")) + " " + line.strip()
                ).strip()
                continue
            current = key if key in _CONTINUED else None
            inline_gpu = _GPU_LINE.match(value) if key == "gpu models and configuration" else None
            if inline_gpu:
                gpus.append({"index": int(inline_gpu.group(1)), "model": inline_gpu.group(2)})
            if key in _KEYS and value and value.lower() not in ("n/a", "could not collect"):
                facts.setdefault(_KEYS[key], value)
            continue
        if current == "vllm build flags":
            facts["vllm_build_flags"] = (
                str(facts.get("vllm_build_flags", "")) + " " + line.strip()
            ).strip()
    if gpus:
        facts["gpus"] = gpus
        facts["gpu_count"] = len(gpus)
        facts["gpu"] = gpus[0]["model"]
    if packages:
        facts["packages"] = packages
        if "torch_version" not in facts and "torch" in packages:
            facts["torch_version"] = packages["torch"]
    if env:
        facts["env"] = env
    if topology:
        cells = " ".join(topology)
        facts["interconnect"] = "nvlink" if re.search(r"\bNV\d{1,2}\b", cells) else "pcie"
    version = facts.get("vllm_version")
    if isinstance(version, str):
        sha = _VLLM_SHA.search(version)
        if sha:
            facts["vllm_git_sha"] = sha.group(1) or sha.group(2)
        facts["vllm_version"] = version.split()[0]
    platform = str(facts.get("platform", "")) + " " + str(facts.get("os", ""))
    if "microsoft-standard-wsl" in platform.lower() or "wsl" in platform.lower():
        facts["wsl"] = True
    for key in ("torch_version", "cuda_build", "cuda_runtime", "driver_version"):
        if isinstance(facts.get(key), str):
            facts[key] = facts[key].split()[0]
    if isinstance(facts.get("python"), str):
        facts["python"] = facts["python"].split()[0]
    return facts


def fact_lines(facts: dict[str, Any]) -> list[str]:
    """The facts as lines the engine's fact patterns read (`vLLM Version: X`, `GPU 0: ...`), so
    that applicability and the differential see them, without matching the dump as a log."""
    out: list[str] = []
    if facts.get("vllm_version"):
        out.append(f"vLLM Version: {facts['vllm_version']}")
    if facts.get("torch_version"):
        out.append(f"PyTorch version: {facts['torch_version']}")
    if facts.get("cuda_build"):
        out.append(f"CUDA used to build PyTorch: {facts['cuda_build']}")
    if facts.get("driver_version"):
        out.append(f"Nvidia driver version: {facts['driver_version']}")
    out.extend(f"GPU {g['index']}: {g['model']}" for g in facts.get("gpus", [])[:16])
    return out
