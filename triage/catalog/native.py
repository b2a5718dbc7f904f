"""Locate a failure that prints its own place in the source: a Go panic by its goroutine's
frames, a C/C++ assertion or check (and a Rust panic) by the `file:line` it names.

The templates and Python frames of the catalog cannot locate these: a Go runtime panic's text is
the Go runtime's (`index out of range [0] with length 0`), an assertion's text is its own
expression. The log says where the code stopped; the path names the project (a Go module path, a
checkout's directory names, a crate in cargo's registry), the layer table gives the layer, and
the catalog's project list the repository link where it holds the project.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from triage.catalog.store import CatalogStore

# The scan pattern the facade adds: the two lines of each Go stack frame, a function line
# (`github.com/ollama/ollama/server.(*blobDownload).Prepare(0xc0002d1e30, ...)`, `main.main()`)
# and its file line (`\t/path/download.go:175 +0x539`). A function line needs a module path with
# a domain, or the `main` / `runtime` package, and Go's argument forms, so Python's
# `self.model.load()` is not one.
GO_FRAME_PATTERN = (
    r"\.go:[0-9]+(?: \+0x[0-9a-f]+|\r?$)"
    r"|(?:^|\s)(?:(?:[a-z0-9-]+\.)+[a-z]{2,}/[\w./~-]+|main|runtime)\.(?:\(\*?[A-Za-z_]\w*(?:\[[^\]\n]{0,80}\])?\)\.)?"
    r"[A-Za-z_]\w*(?:\.func[0-9]+)*\((?:0x[0-9a-f]|\{0x|\.\.\.\)|\)$)"
)
_GO_FILE = re.compile(r"(?P<path>\S+\.go):(?P<line>[0-9]+)(?: \+0x[0-9a-f]+|\r?$)")
_GO_FUNC = re.compile(
    r"(?:^|\s)(?P<pkg>(?:[\w.~-]+/)*[\w~-]+)\.(?P<func>(?:\(\*?[A-Za-z_]\w*(?:\[[^\]\n]{0,80}\])?\)\.)?"
    r"[A-Za-z_]\w*)(?:\.func[0-9]+)*\("
)
# A Go panic's first line, as the runtime writes it to stderr (a hook's stderr inside docker's
# one-line "Error response from daemon: ... stderr: SIGSEGV: segmentation violation" too)
GO_PANIC = re.compile(r"(?:^|\bstderr: )(?:panic: |fatal error: |SIG[A-Z]{3,6}: [a-z])\S?")
_GO_STACK_LINES = 160
# the runtime's own functions that raise a panic or throw: the frame below them is where it arose
_RUNTIME_RAISERS = re.compile(
    r"^(?:throw|fatalthrow|fatalpanic|gopanic|goPanic\w*|panic\w*|sigpanic|morestack|newstack)$"
)  # lines after the panic line that its goroutine dumps may take
# A native place in the line itself: `rope.cu:423: GGML_ASSERT(...) failed`, TensorRT-LLM's
# `Assertion failed: expr (/src/.../kvCacheIndex.h:47)`, glibc's `prog: file.cpp:40: func:
# Assertion ...`, Rust's `panicked at /root/.cargo/registry/src/.../lib.rs:12:5`
_NATIVE_PLACE = re.compile(
    r"(?P<path>(?:/|\b[\w.+-]+/)[\w./+-]*?\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|rs)):(?P<line>[0-9]+)\b"
)
_NATIVE_FAILURE = re.compile(
    r"_ASSERT\(|Assertion `|Assertion failed|\bpanicked at |\bCHECK failed|Check failed|"
    r"\bcheck failed\b|TORCH_CHECK|\bfailed\b|\berror\b|\bERROR\b"
)

# (path pattern, project): the first whose pattern is found names the project; `file` is the
# repository path. A Go module path is also read from a frame's function line (its package path
# plus the file's name), for a binary built in a checkout whose directory says nothing.
PATH_PROJECTS: tuple[tuple[str, str], ...] = (
    (r"(?:^|/)github\.com/ollama/ollama/(?P<file>.+)$", "ollama"),
    (
        r"(?:^|/)ollama/ollama/(?P<file>(?:api|cmd|server|llm|llama|discover|gpu|ml|runner|envconfig|model|fs|convert)/.+)$",
        "ollama",
    ),
    (r"(?:^|/)github\.com/NVIDIA/go-nvml/(?P<file>.+)$", "go-nvml"),
    (
        r"(?:^|/)github\.com/NVIDIA/nvidia-container-toolkit/(?P<file>.+)$",
        "nvidia-container-toolkit",
    ),
    (
        r"(?:^|/)nvidia-container-toolkit/(?P<file>(?:cmd|internal|pkg)/.+)$",
        "nvidia-container-toolkit",
    ),
    (r"(?:^|/)github\.com/ROCm/container-toolkit/(?P<file>.+)$", "amd-container-toolkit"),
    (r"(?:^|/)github\.com/NVIDIA/k8s-device-plugin/(?P<file>.+)$", "k8s-device-plugin"),
    (r"(?:^|/)(?P<file>ggml/(?:src|include)/.+)$", "llama.cpp"),
    (r"(?:^|/)llama\.cpp/(?P<file>(?:src|tools|examples|common)/.+)$", "llama.cpp"),
    (r"(?:^|/)(?P<file>cpp/(?:include/)?tensorrt_llm/.+)$", "tensorrt-llm"),
    (r"(?:^|/)(?P<file>(?:aten/src|c10|torch/csrc)/.+)$", "torch-cpp"),
    (r"(?:^|/)vllm/(?P<file>csrc/.+)$", "vllm"),
    (r"(?:^|/)(?P<file>sgl-kernel/.+)$", "sglang"),
    (r"(?:^|/)nccl/(?P<file>src/.+)$", "nccl"),
    (r"\.cargo/registry/src/[^/]+/tokenizers-[0-9][\w.+-]*/(?P<file>.+)$", "tokenizers"),
    (r"\.cargo/registry/src/[^/]+/safetensors-[0-9][\w.+-]*/(?P<file>.+)$", "safetensors"),
)
# NOTE "go" (the Go runtime itself) is named by go_place from its runtime frames, not by a path.
_PATH_PROJECTS = tuple((re.compile(rx), project) for rx, project in PATH_PROJECTS)


@dataclass(frozen=True, slots=True)
class NativePlace:
    """Where a native failure stopped, as the log prints it."""

    project: str
    file: str  # repository path
    line: int  # the line in the log's build (its release is unknown)
    function: str
    kind: str  # "Go panic (goroutine frame)" | "assertion (file:line it prints)"
    how: str  # how it was found, for --explain


def project_of(path: str) -> tuple[str, str] | None:
    """(project, repository path) of a source path a log prints, or None."""
    clean = path.replace("\\", "/")
    for pattern, project in _PATH_PROJECTS:
        found = pattern.search(clean)
        if found:
            return project, found.group("file")
    return None


def _go_function(text: str) -> tuple[str, str] | None:
    """(package path, function as the catalog names it: `blobDownload.Prepare`) of a function
    line."""
    found = _GO_FUNC.search(text)
    if not found:
        return None
    func = found.group("func").replace("(*", "").replace("(", "").replace(")", "")
    func = re.sub(r"\[[^\]]*\]", "", func)
    return found.group("pkg"), func


def go_place(
    text: str, number: int, frames: Sequence[tuple[str, int, str]], stream: str
) -> NativePlace | None:
    """A Go panic line located by the innermost frame below it that belongs to a known project
    (runtime frames and third-party modules are skipped; the next panic ends the search)."""
    if not GO_PANIC.search(text.strip()):
        return None
    below = sorted(
        (line, body)
        for key, line, body in frames
        if key == stream and number < line <= number + _GO_STACK_LINES
    )
    function_at = {line: body for line, body in below if not _GO_FILE.search(body)}
    runtime: NativePlace | None = None
    for line, body in below:
        place = _GO_FILE.search(body)
        if place is None:
            continue
        path, at = place.group("path"), int(place.group("line"))
        head = function_at.get(line - 1, "")
        named = _go_function(head) if head else None
        if (
            (named and named[0] == "runtime")
            or path.startswith("runtime/")
            or "/src/runtime/" in path
        ):
            func = named[1] if named else ""
            if runtime is None and func and not _RUNTIME_RAISERS.match(func):
                file = "src/runtime/" + path.rsplit("/runtime/", 1)[-1].removeprefix("runtime/")
                how = (
                    f"by the innermost Go runtime frame below it (line {line}); "
                    "no frame of a known project"
                )
                runtime = NativePlace("go", file, at, func, "Go panic (goroutine frame)", how)
            continue
        found = project_of(path)
        if found is None and named and not path.rsplit("/", 1)[-1].startswith("_cgo_"):
            # a checkout whose directory names nothing: the package path plus the file's name
            found = project_of(f"{named[0]}/{path.rsplit('/', 1)[-1]}")
        if found is None:
            continue
        project, file = found
        return NativePlace(
            project,
            file,
            at,
            named[1] if named else "",
            "Go panic (goroutine frame)",
            f"by the innermost frame of a known project below it (line {line})",
        )
    return runtime


def inline_place(text: str) -> NativePlace | None:
    """An assertion or check that names its own source file and line."""
    if not _NATIVE_FAILURE.search(text):
        return None
    for found in _NATIVE_PLACE.finditer(text):
        named = project_of(found.group("path"))
        if named is not None:
            project, file = named
            return NativePlace(
                project,
                file,
                int(found.group("line")),
                "",
                "assertion (file:line it prints)",
                "by the source file and line the line itself prints",
            )
    return None


# llama.cpp's and ggml's log calls print the calling function first (`LLAMA_LOG_ERROR("%s: error
# loading model: %s\n", __func__, ...)`): the prefix names the function that printed the line
_GGML_FUNCTION = re.compile(
    r"(?:^|[\s\]>|])(?P<func>(?:llama|ggml|gguf|clip|mtmd)_[a-z0-9_]{2,60}): (?!\s)"
)


def function_place(text: str) -> NativePlace | None:
    """A llama.cpp / ggml failure line located by the function its log call prints first (the
    file is not in the line: `file` stays empty)."""
    found = _GGML_FUNCTION.search(text)
    if found is None or not _NATIVE_FAILURE.search(text[found.end() :]):
        return None
    return NativePlace(
        "llama.cpp",
        "",
        0,
        found.group("func"),
        "llama.cpp log call (function it prints)",
        "by the function name llama.cpp's log call prints before the message",
    )


def file_releases(store: CatalogStore, project: str, file: str) -> int:
    """The release mask of the catalogued releases whose messages come from this file (0: the
    catalog has no message of the file)."""
    mask = 0
    for (releases,) in store.conn.execute(
        "SELECT DISTINCT s.releases FROM site s JOIN path p ON p.id = s.path "
        "WHERE s.project = ? AND p.file = ?",
        (project, file),
    ):
        mask |= int(releases)
    return mask


# Lines above a self-located crash that are its wrapper's account of it (docker's "Error response
# from daemon: ... error running hook: exit status 2" above the hook's own SIGABRT and frames)
WRAPPER_LINES = 3


def crash_shadow(
    lines: Sequence[tuple[str, int, str]], go_frames: Sequence[tuple[str, int, str]]
) -> set[tuple[str, int]]:
    """The failure lines ((input, line, text)) that a crash printing its own place accounts for:
    the crash line and the WRAPPER_LINES above it. No cause is inferred from supporting lines near
    them (docs/ranking.md): the crash says where it stopped, and a supporting tell beside it (a
    hook that exited 2) is the crash's report, not another cause's."""
    shadow: set[tuple[str, int]] = set()
    for name, number, text in lines:
        place = go_place(text, number, go_frames, name) or inline_place(text)
        if place is not None:
            shadow.update((name, number - k) for k in range(WRAPPER_LINES + 1))
    return shadow
