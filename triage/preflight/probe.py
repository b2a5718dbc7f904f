"""`triage probe`: collect read-only evidence from the host an engine runs on.

Every section degrades on its own: a missing tool, a permission refused or a timeout is recorded
under `missing` and the probe goes on. Only fixed, read-only commands run (nvidia-smi queries,
dmesg / journalctl -k reads); nothing from a config or the environment is executed.

The bundle is `probe.json` plus `probe-summary.txt`, a log-like text that `triage` reads: its
`kernel messages:` section keeps the kernel lines verbatim, so node signatures (Xid, DMAR, AER,
OOM killer) fire on it exactly as on a dmesg capture.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import re
import resource
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.redact import redact

# What each section supplies (signatures' `differential.probe` names these sections).
SECTIONS: dict[str, str] = {
    "versions": "driver, CUDA, NCCL, torch and engine versions",
    "gpu": "nvidia-smi -q essentials: ECC, retired/remapped rows, clocks, throttle reasons, "
    "persistence, MIG",
    "topology": "nvidia-smi topo -m",
    "nvlink": "nvidia-smi nvlink -s (link state)",
    "kernel": "kernel command line (IOMMU mode) and recent Xid/NVRM/DMAR/AMD-Vi/AER/OOM/hung-task "
    "kernel messages",
    "limits": "ulimit -l / -n of this shell",
    "shm": "/dev/shm size and use",
    "disk": "free space where models and caches live",
    "container": "container runtime, GPU device nodes",
    "env": "VLLM_*, NCCL_*, CUDA_*, TORCH_* environment (secret-looking values redacted)",
    "p2p": "pairwise GPU peer-to-peer round trip (opt-in: --p2p)",
}

KERNEL_LINE_RE = re.compile(
    r"Xid|NVRM|DMAR|AMD-Vi|\bAER\b|PCIe Bus Error|iommu|IOMMU|Out of memory|oom-kill|oom_reaper|"
    r"invoked oom-killer|hung_task|blocked for more than|fallen off the bus|nvidia-nvswitch|"
    r"Machine check|mce:",
)
_SECRET_NAME_RE = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|AUTH|CREDENTIAL|PRIVATE|_KEY$", re.I)
_ENV_PREFIXES = (
    "VLLM_",
    "NCCL_",
    "CUDA_",
    "TORCH_",
    "PYTORCH_",
    "SGLANG_",
    "NVIDIA_",
    "HF_",
    "TRITON_",
    "LD_LIBRARY_PATH",
)
_SMI_KEYS = re.compile(
    r"Product Name|Bus Id|Persistence Mode|MIG Mode|Current\s*:|Pending\s*:|ECC|Volatile|Aggregate|"
    r"Single Bit|Double Bit|Retired|Remapp|Correctable|Uncorrectable|Throttle|Event Reasons|"
    r"Clocks|Graphics|SM\s*:|Memory\s*:|Slowdown|Power|Temp|Driver Version|CUDA Version|"
    r"Fabric|State\s*:|Status\s*:|GPU Reset|Performance State|Active|Idle|Sync Boost|Thermal|HW "
)
KERNEL_LINES_MAX = 2000


@dataclass
class Section:
    name: str
    data: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.data, "missing": self.missing}


Runner = Callable[[list[str], float], tuple[int | None, str, str]]


def run_command(cmd: list[str], timeout: float) -> tuple[int | None, str, str]:
    """(returncode or None when it could not run, stdout, reason)."""
    if shutil.which(cmd[0]) is None:
        return None, "", f"{cmd[0]} is not on PATH"
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return None, "", f"`{' '.join(cmd)}` timed out after {timeout:g} s"
    except OSError as exc:
        return None, "", f"`{' '.join(cmd)}` could not start: {exc.strerror or exc}"
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        return (
            proc.returncode,
            proc.stdout,
            (f"`{' '.join(cmd)}` exited {proc.returncode}" + (f": {err[-1][:200]}" if err else "")),
        )
    return 0, proc.stdout, ""


@dataclass
class ProbeOptions:
    out: Path = Path("triage-probe")
    p2p: bool = False
    p2p_timeout: float = 60.0
    kernel_log: Path | None = None
    paths: list[Path] = field(default_factory=list)
    timeout: float = 15.0
    environ: dict[str, str] | None = None


class Probe:
    def __init__(self, options: ProbeOptions, runner: Runner = run_command) -> None:
        self.o = options
        self.run_cmd = runner
        self.env = dict(os.environ if options.environ is None else options.environ)

    def _cmd(self, sec: Section, cmd: list[str]) -> str | None:
        code, out, why = self.run_cmd(cmd, self.o.timeout)
        if code != 0:
            sec.missing.append(why)
            return None
        return out

    # -- sections ---------------------------------------------------------------------------
    def versions(self) -> Section:
        sec = Section("versions")
        sec.data["python"] = platform.python_version()
        sec.data["kernel"] = platform.release()
        proc_version = Path("/proc/driver/nvidia/version")
        if proc_version.is_file():
            text = proc_version.read_text(errors="replace")
            m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
            sec.data["driver"] = m.group(1) if m else text.splitlines()[0].strip()
        out = self._cmd(
            sec,
            ["nvidia-smi", "--query-gpu=driver_version,name,memory.total", "--format=csv,noheader"],
        )
        if out:
            rows = [r.strip() for r in out.splitlines() if r.strip()]
            sec.data["gpus"] = rows
            sec.data.setdefault("driver", rows[0].split(",")[0].strip() if rows else None)
        smi = self._cmd(sec, ["nvidia-smi"])
        if smi:
            m = re.search(r"CUDA Version:\s*([0-9.]+)", smi)
            if m:
                sec.data["cuda_driver_api"] = m.group(1)
        if "driver" not in sec.data:
            sec.missing.append("driver version: no /proc/driver/nvidia/version and no nvidia-smi")
        from importlib import metadata

        packages = {}
        for name in (
            "torch",
            "vllm",
            "sglang",
            "flashinfer-python",
            "triton",
            "nvidia-nccl-cu12",
            "nvidia-nccl-cu13",
            "nvidia-cuda-runtime-cu12",
            "lmcache",
            "transformers",
        ):
            try:
                packages[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        sec.data["packages"] = packages
        for need in ("torch", "vllm"):
            if need not in packages:
                sec.missing.append(f"{need}: not installed in this Python ({sys.executable})")
        nvcc = self._cmd(sec, ["nvcc", "--version"])
        if nvcc:
            m = re.search(r"release ([0-9.]+)", nvcc)
            sec.data["nvcc"] = m.group(1) if m else nvcc.strip().splitlines()[-1]
        return sec

    def gpu(self) -> Section:
        sec = Section("gpu")
        out = self._cmd(sec, ["nvidia-smi", "-q"])
        if out:
            sec.data["essentials"] = [
                ln.rstrip() for ln in out.splitlines() if _SMI_KEYS.search(ln) and ln.strip()
            ][:1500]
            sec.data["gpu_count"] = sum(1 for ln in out.splitlines() if ln.startswith("GPU "))
        return sec

    def topology(self) -> Section:
        sec = Section("topology")
        out = self._cmd(sec, ["nvidia-smi", "topo", "-m"])
        if out:
            sec.data["matrix"] = out.rstrip().splitlines()
        return sec

    def nvlink(self) -> Section:
        sec = Section("nvlink")
        out = self._cmd(sec, ["nvidia-smi", "nvlink", "-s"])
        if out:
            lines = out.rstrip().splitlines()
            sec.data["status"] = lines
            sec.data["inactive_links"] = sum(1 for ln in lines if re.search(r"inactive", ln, re.I))
        return sec

    def kernel(self) -> Section:
        sec = Section("kernel")
        try:
            cmdline = Path("/proc/cmdline").read_text(errors="replace").strip()
            sec.data["cmdline"] = cmdline
            sec.data["iommu"] = iommu_mode(cmdline)
        except OSError as exc:
            sec.missing.append(f"/proc/cmdline: {exc.strerror}")
        groups = Path("/sys/kernel/iommu_groups")
        if groups.is_dir():
            with contextlib.suppress(OSError):
                sec.data["iommu_groups"] = sum(1 for _ in groups.iterdir())
        lines: list[str] | None = None
        source = ""
        if self.o.kernel_log is not None:
            try:
                lines = self.o.kernel_log.read_text(errors="replace").splitlines()
                source = str(self.o.kernel_log)
            except OSError as exc:
                sec.missing.append(f"kernel log {self.o.kernel_log}: {exc.strerror}")
        if lines is None:
            for cmd in (
                ["dmesg", "-T"],
                ["dmesg"],
                ["journalctl", "-k", "-b", "--no-pager", "-q", "-n", "50000"],
            ):
                code, out, why = self.run_cmd(cmd, self.o.timeout)
                if code == 0 and out.strip():
                    lines, source = out.splitlines(), " ".join(cmd)
                    break
                sec.missing.append(why or f"`{' '.join(cmd)}` printed nothing")
            if lines is None:
                kern = Path("/var/log/kern.log")
                try:
                    lines = kern.read_text(errors="replace").splitlines()[-50000:]
                    source = str(kern)
                except OSError as exc:
                    sec.missing.append(f"{kern}: {exc.strerror}")
        if lines is not None:
            sec.missing = [
                m
                for m in sec.missing
                if not m.startswith(("`dmesg", "`journalctl", "dmesg", "journalctl"))
            ]
            picked = [ln for ln in lines if KERNEL_LINE_RE.search(ln)]
            sec.data["source"] = source
            sec.data["lines_read"] = len(lines)
            sec.data["messages"] = picked[-KERNEL_LINES_MAX:]
            sec.data["xid"] = sorted(
                {m.group(1) for ln in picked for m in [re.search(r"Xid \([^)]*\): (\d+)", ln)] if m}
            )
        else:
            sec.missing.append(
                "kernel messages: none readable (dmesg needs root or "
                "kernel.dmesg_restrict=0; try `sudo dmesg -T > dmesg.txt` and "
                "`triage probe --kernel-log dmesg.txt`)"
            )
        return sec

    def limits(self) -> Section:
        sec = Section("limits")
        for name, res in (("memlock", resource.RLIMIT_MEMLOCK), ("nofile", resource.RLIMIT_NOFILE)):
            soft, hard = resource.getrlimit(res)
            sec.data[name] = {"soft": _limit(soft), "hard": _limit(hard)}
        return sec

    def shm(self) -> Section:
        sec = Section("shm")
        try:
            st = os.statvfs("/dev/shm")
            total = st.f_blocks * st.f_frsize
            free = st.f_bavail * st.f_frsize
            sec.data.update(total_bytes=total, free_bytes=free, used_bytes=total - free)
        except OSError as exc:
            sec.missing.append(f"/dev/shm: {exc.strerror}")
        return sec

    def disk(self) -> Section:
        sec = Section("disk")
        home = Path(self.env.get("HOME", str(Path.home())))
        candidates = [
            Path(self.env[k])
            for k in (
                "HF_HOME",
                "HF_HUB_CACHE",
                "VLLM_CACHE_ROOT",
                "TRITON_CACHE_DIR",
                "TORCHINDUCTOR_CACHE_DIR",
                "XDG_CACHE_HOME",
            )
            if self.env.get(k)
        ]
        candidates += [
            home / ".cache" / "huggingface",
            home / ".cache",
            Path("/tmp"),
            Path("/var/lib/docker"),
            Path("/var/lib/containerd"),
            Path.cwd(),
        ]
        candidates += self.o.paths
        seen: set[str] = set()
        for p in candidates:
            q = p
            while not q.exists() and q != q.parent:
                q = q.parent
            try:
                st = os.statvfs(q)
            except OSError as exc:
                sec.missing.append(f"{p}: {exc.strerror}")
                continue
            key = f"{st.f_fsid}"
            entry = {
                "path": str(p),
                "checked": str(q),
                "free_bytes": st.f_bavail * st.f_frsize,
                "total_bytes": st.f_blocks * st.f_frsize,
            }
            sec.data.setdefault("paths", []).append(entry)
            seen.add(key)
        return sec

    def container(self) -> Section:
        sec = Section("container")
        inside = []
        if Path("/.dockerenv").exists():
            inside.append("docker (/.dockerenv)")
        if Path("/run/.containerenv").exists():
            inside.append("podman (/run/.containerenv)")
        try:
            cg = Path("/proc/1/cgroup").read_text(errors="replace")
            inside.extend(
                f"cgroup mentions {word}"
                for word in ("docker", "kubepods", "containerd", "libpod", "lxc")
                if word in cg
            )
        except OSError:
            pass
        if self.env.get("KUBERNETES_SERVICE_HOST"):
            inside.append("kubernetes (KUBERNETES_SERVICE_HOST)")
        sec.data["inside_container"] = inside
        sec.data["runtimes_on_path"] = [
            t
            for t in (
                "docker",
                "podman",
                "nerdctl",
                "containerd",
                "nvidia-container-cli",
                "nvidia-ctk",
            )
            if shutil.which(t)
        ]
        nodes = sorted(
            str(p)
            for pattern in ("nvidia*", "nvidia-caps/*", "dri/*", "infiniband/*")
            for p in Path("/dev").glob(pattern)
        )
        sec.data["device_nodes"] = nodes
        if not any("nvidia" in n for n in nodes):
            sec.missing.append(
                "GPU device nodes: no /dev/nvidia* here (no GPU, or none passed into the container)"
            )
        return sec

    def environment(self) -> Section:
        sec = Section("env")
        picked: dict[str, str] = {}
        for name, value in sorted(self.env.items()):
            if not name.startswith(_ENV_PREFIXES):
                continue
            if _SECRET_NAME_RE.search(name):
                picked[name] = "<redacted>"
            else:
                picked[name] = redact(value)
        sec.data["vars"] = picked
        return sec

    def p2p(self) -> Section:
        sec = Section("p2p")
        cmd = [sys.executable, "-m", "triage.preflight.p2p", "--timeout", str(self.o.p2p_timeout)]
        try:
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                check=False,
                timeout=self.o.p2p_timeout + 60,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            sec.missing.append(
                f"p2p check did not finish within {self.o.p2p_timeout + 60:g} s "
                "(a hang here is itself evidence of a P2P fault)"
            )
            return sec
        try:
            sec.data.update(json.loads(proc.stdout))
        except json.JSONDecodeError:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            sec.missing.append(f"p2p check failed: {last}")
        if sec.data.get("skipped"):
            sec.missing.append(f"p2p: {sec.data['skipped']}")
        return sec

    # -- all --------------------------------------------------------------------------------
    def collect(self) -> dict[str, Any]:
        steps: list[Callable[[], Section]] = [
            self.versions,
            self.gpu,
            self.topology,
            self.nvlink,
            self.kernel,
            self.limits,
            self.shm,
            self.disk,
            self.container,
            self.environment,
        ]
        if self.o.p2p:
            steps.append(self.p2p)
        sections: dict[str, Any] = {}
        for step in steps:
            try:
                sec = step()
            except Exception as exc:  # one broken collector never stops the others
                sec = Section(
                    step.__name__, missing=[f"collector failed: {type(exc).__name__}: {exc}"]
                )
            sec.missing = list(dict.fromkeys(sec.missing))
            sections[sec.name] = sec.to_dict()
        not_collected = [f"{name}: {m}" for name, s in sections.items() for m in s["missing"]]
        return {
            "probe_version": 1,
            "host": socket.gethostname(),
            "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "uid": os.getuid(),
            "sections": sections,
            "not_collected": not_collected,
        }


def _limit(value: int) -> str | int:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def iommu_mode(cmdline: str) -> str:
    """'passthrough (iommu=pt)', 'translated (intel_iommu=on)', 'off', or 'default (not set)'."""
    words = cmdline.split()
    opts = {w.split("=", 1)[0]: w.split("=", 1)[1] if "=" in w else "" for w in words}
    if opts.get("iommu") == "pt" or opts.get("amd_iommu") == "pt":
        return "passthrough (iommu=pt)"
    if "off" in (opts.get("intel_iommu"), opts.get("amd_iommu"), opts.get("iommu")):
        return "off"
    if opts.get("intel_iommu", "").startswith("on") or opts.get("amd_iommu") == "on":
        return "translated DMA (IOMMU on without iommu=pt): GPU peer-to-peer may fault"
    return "default (no iommu option on the kernel command line)"


def summary_text(bundle: dict[str, Any]) -> str:
    """A log-like summary `triage` can read; kernel lines are copied verbatim."""
    s = bundle["sections"]
    out = [
        f"triage probe bundle v{bundle['probe_version']} host={bundle['host']} "
        f"time={bundle['time']} uid={bundle['uid']}"
    ]

    def put(section: str, text: str) -> None:
        out.append(f"[{section}] {text}")

    v = s.get("versions", {}).get("data", {})
    put(
        "versions",
        f"driver={v.get('driver', '?')} "
        f"cuda_driver_api={v.get('cuda_driver_api', '?')} nvcc={v.get('nvcc', '?')} "
        f"python={v.get('python')} kernel={v.get('kernel')}",
    )
    for name, ver in sorted(v.get("packages", {}).items()):
        put("versions", f"{name}=={ver}")
    for row in v.get("gpus", []):
        put("versions", f"gpu: {row}")
    for ln in s.get("gpu", {}).get("data", {}).get("essentials", []):
        put("gpu", ln.strip())
    for ln in s.get("topology", {}).get("data", {}).get("matrix", []):
        put("topology", ln)
    for ln in s.get("nvlink", {}).get("data", {}).get("status", []):
        put("nvlink", ln.strip())
    k = s.get("kernel", {}).get("data", {})
    if "cmdline" in k:
        put("kernel", f"cmdline: {k['cmdline']}")
        put("kernel", f"iommu mode: {k.get('iommu')}")
    lim = s.get("limits", {}).get("data", {})
    for name, val in lim.items():
        put("limits", f"{name}: soft={val['soft']} hard={val['hard']}")
    sh = s.get("shm", {}).get("data", {})
    if sh:
        put(
            "shm",
            f"/dev/shm total={_gib(sh['total_bytes'])} used={_gib(sh['used_bytes'])} "
            f"free={_gib(sh['free_bytes'])}",
        )
    for entry in s.get("disk", {}).get("data", {}).get("paths", []):
        put(
            "disk",
            f"{entry['path']}: free={_gib(entry['free_bytes'])} of {_gib(entry['total_bytes'])}",
        )
    c = s.get("container", {}).get("data", {})
    inside = ", ".join(c.get("inside_container", [])) or "no sign of a container"
    put(
        "container",
        f"inside={inside} runtimes={','.join(c.get('runtimes_on_path', [])) or 'none on PATH'}",
    )
    put("container", f"device nodes: {' '.join(c.get('device_nodes', [])) or 'none'}")
    for name, val in s.get("env", {}).get("data", {}).get("vars", {}).items():
        put("env", f"{name}={val}")
    p2p = s.get("p2p", {}).get("data", {})
    if p2p:
        from triage.preflight.p2p import summary_lines

        for ln in summary_lines(p2p):
            put("p2p", ln)
    out.append(
        f"kernel messages: ({len(k.get('messages', []))} lines from {k.get('source') or 'nowhere'})"
    )
    out.extend(k.get("messages", []))
    out.append("end of kernel messages")
    out.append(f"not collected: {len(bundle['not_collected'])} item(s)")
    out.extend(f"  - {item}" for item in bundle["not_collected"])
    return "\n".join(out) + "\n"


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f}GiB"


def write_bundle(bundle: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write the bundle's two files; an existing file there that is not a probe bundle's is
    refused (ForeignFileError, nothing written), and each file is replaced atomically."""
    from triage.safewrite import check_target, write_atomic

    jpath = out / "probe.json"
    tpath = out / "probe-summary.txt"
    check_target(jpath, "a triage probe bundle", lambda _p, head: b'"probe_version"' in head)
    check_target(tpath, "a triage probe summary", lambda _p, head: head.startswith(b"triage probe"))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(jpath, json.dumps(bundle, indent=1) + "\n")
    write_atomic(tpath, summary_text(bundle))
    return jpath, tpath
