#!/usr/bin/env python3
"""Build triage/data/catalog.sqlite: every message the serving stack's own source can print.

For each release of each source below it reads (never imports, never executes) the source files
and records every message a ``raise``, a logger call, ``warnings.warn``, an ``assert``, a
``TORCH_CHECK``, an NCCL ``WARN``, a Go ``fmt.Errorf`` or a Rust ``new_err``/``#[error]`` can
print: the literal template (placeholders turned into the wildcard ``<*>``), the project, the
releases that print it, the file, the enclosing function or class, the call kind (exception type,
log level, macro) and the line at each release (the link to the tagged source is built from it at
lookup time). The data holds message texts and their locations, never code.

Step 1, download (the only step that needs a network; everything lands outside the repo):

    mkdir -p /work/catalog-src/pypi && cd /work/catalog-src/pypi
    # wheels (pure .py inside; vLLM's and SGLang's sdists need a full build just to be downloaded)
    for v in 0.5.5 0.6.3.post1 0.6.6.post1 0.7.3 0.8.5.post1 0.9.2 0.10.0 0.10.2 0.11.0 0.11.2 \
             0.14.1 0.25.1 0.30.0 0.33.0; do
      pip download --no-deps --only-binary :all: --python-version 3.12 \
          --platform manylinux_2_28_x86_64 --platform manylinux1_x86_64 vllm==$v; done
    for v in 0.4.0 0.4.6 0.4.10 0.5.3 0.5.10; do pip download --no-deps sglang==$v; done
    pip download --no-deps --no-binary :all: transformers==4.57.1 huggingface_hub==0.36.0 \
        xgrammar==0.1.25 aiohttp==3.13.2 httpx==0.28.1 openai==2.8.1 uvicorn==0.38.0
    pip download --no-deps --no-binary :all: transformers==4.45.2   # vLLM 0.6's transformers
    pip download --no-deps --no-binary :all: accelerate==1.15.0 accelerate==0.30.1 \
        diffusers==0.42.1 diffusers==0.35.2 gguf==0.19.0 \
        autogen-agentchat==0.7.5 autogen-ext==0.7.5 autogen-core==0.7.5
    pip download --no-deps --only-binary :all: --python-version 3.12 litellm==1.110.2  # sdist: a build
    pip download --no-deps --only-binary :all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        triton==3.4.0 ray==2.51.1 lmcache==0.3.9 flashinfer-python==0.5.2
    pip download --no-deps --only-binary :all: --python-version 3.12 \
        --platform macosx_11_0_arm64 torch==2.9.1 torch==2.7.1 torch==2.5.1   # smallest wheels
    # git snapshots (bare git directories) of NVIDIA/nccl, NVIDIA/nvidia-container-toolkit,
    # NVIDIA/libnvidia-container (the pop-os packaging fork of v1.12.1: upstream's history is too
    # large to fetch), NVIDIA/open-gpu-kernel-modules, huggingface/tokenizers, huggingface/safetensors,
    # pydantic/pydantic-core, NVIDIA/pyxis, ollama/ollama, kvcache-ai/Mooncake, ai-dynamo/nixl
    # under /work/.mirror/<owner>+<name>/repo (ollama's and Mooncake's lack some large blobs: they
    # are read blob by blob under GIT_PATHS)
    # Debian source packages (upstream tarballs, through apt's ordinary client, with a private
    # sources.list of `deb-src http://deb.debian.org/debian trixie main` and `... bookworm main`):
    # PyTorch's C++ (.cpp, .cu: the wheels carry only headers; the GitHub snapshot is over the
    # fetch limit), systemd (likewise), CPython (the runtime's own messages)
    mkdir -p /work/catalog-src/debian && cd /work/catalog-src/debian
    apt-get source --download-only pytorch=2.6.0+dfsg-7 systemd=257.13-1~deb13u1 \
        systemd=252.39-1~deb12u2 python3.13=3.13.5-2+deb13u5 slurm-wlm=22.05.8-4+deb12u3 \
        slurm-wlm=24.11.5-4+deb13u1 gcc-14=14.2.0-13   # only the .orig.tar.* are read
    # (a .dsc or .debian.tar.xz that 404s does not matter: the .orig.tar.* is what is read; gcc's
    # holds upstream's gcc-14.2.0-dfsg.tar.xz, read as a stream for libstdc++-v3/libsupc++/)

Step 2, build (offline, deterministic):

    python scripts/build_message_catalog.py --pypi /work/catalog-src/pypi --git /work/.mirror \
        --debian /work/catalog-src/debian

Missing sources are skipped with a note (``--strict`` makes that an error). The output is
byte-for-byte the same for the same inputs: rows are inserted in sorted order into a fresh
database with a fixed page size, then VACUUMed; nothing time- or host-dependent is stored.

Licences of the sources (the catalog stores short message strings and locations from them):
vLLM Apache-2.0; SGLang Apache-2.0; PyTorch BSD-3-Clause; NCCL BSD-3-Clause; transformers,
huggingface_hub, tokenizers, safetensors Apache-2.0; Triton MIT; FlashInfer Apache-2.0; xgrammar
Apache-2.0; Ray Apache-2.0; LMCache Apache-2.0; aiohttp Apache-2.0; httpx BSD-3-Clause; openai
Apache-2.0; NVIDIA container toolkit Apache-2.0; libnvidia-container Apache-2.0 (the library) with
BSD parts; open-gpu-kernel-modules dual MIT/GPL-2.0; PyTorch's C++ sources (Debian's pytorch
2.6.0+dfsg, the upstream v2.6.0 tree less non-free third-party parts) BSD-3-Clause; systemd
LGPL-2.1-or-later (its src/core, src/systemctl, src/network are read); CPython PSF-2.0; Slurm
GPL-2.0-or-later (with its OpenSSL linking exception); pyxis Apache-2.0; ollama MIT; Mooncake
Apache-2.0; NIXL Apache-2.0; uvicorn BSD-3-Clause; GCC's libstdc++ GPL-3.0-or-later with the GCC
Runtime Library Exception (only libsupc++'s terminate handler is read); accelerate, diffusers
Apache-2.0; gguf (llama.cpp's gguf-py) MIT; litellm MIT outside its enterprise/ directories (which
are under another licence and are not read); AutoGen (autogen-agentchat, autogen-ext,
autogen-core) MIT for the code.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sqlite3
import subprocess
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "triage" / "data" / "catalog.sqlite"
WILDCARD = "<*>"
# 2: a site names its file by a row of `path` (size); 3: no UNIQUE index on templates and paths
# (the builder dedupes them; the lookup never searches by text), and the functions each Python
# file defines, per release (a traceback frame names one)
CATALOG_FORMAT = "triage.catalog/3"
MIN_LITERAL = 10  # literal characters a template needs to say anything (fewer: dropped)
MAX_TEMPLATE = 300  # characters kept of one template
MAX_WILDCARDS = 8  # a template is cut after its 8th placeholder (the rest says little, costs much)
MAX_FILE_BYTES = 2 << 20  # generated tables and vendored blobs are not messages


# -- messages --------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Message:
    template: str
    kind: str  # ValueError | logger.warning | TORCH_CHECK | WARN | fmt.Errorf | ...
    function: str  # enclosing function or Class.method, "" at module level
    line: int


def normalise(parts: Iterable[str | None]) -> list[str]:
    """Template lines from literal parts (str) and placeholders (None): whitespace collapsed,
    adjacent placeholders merged, at most MAX_WILDCARDS, only lines with enough literal text."""
    text = "".join(WILDCARD if p is None else p.replace(WILDCARD, "<?>") for p in parts)
    out: list[str] = []
    for raw in text.split("\n"):
        line = re.sub(r"[ \t\r\f\v]+", " ", raw).strip()
        line = re.sub(r"(?:<\*>\s*){2,}", WILDCARD + " ", line).replace("<*> <*>", WILDCARD)
        line = re.sub(r"(?:<\*>){2,}", WILDCARD, line).strip()
        pieces = line.split(WILDCARD)
        if len(pieces) > MAX_WILDCARDS + 1:
            line = WILDCARD.join(pieces[: MAX_WILDCARDS + 1])
        line = line[:MAX_TEMPLATE].strip()
        literal = re.sub(r"[\W_]+", "", line.replace(WILDCARD, ""))
        if len(line.replace(WILDCARD, "").strip()) >= MIN_LITERAL and len(literal) >= 6:
            out.append(line)
    return out


# (`%m`: glibc's and Slurm's and systemd's strerror(errno) conversion)
_PERCENT_RE = re.compile(
    r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|q|j|z|t|P[A-Z0-9]+)?[diouxXeEfFgGcrsapnlum%]"
)
_BRACE_RE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def split_percent(fmt: str) -> list[str | None]:
    """printf / Python %-format: literal parts and None per conversion ("%%" is a literal %)."""
    parts: list[str | None] = []
    pos = 0
    for found in _PERCENT_RE.finditer(fmt):
        parts.append(fmt[pos : found.start()])
        parts.append("%" if found.group() == "%%" else None)
        pos = found.end()
    parts.append(fmt[pos:])
    return parts


def split_braces(fmt: str) -> list[str | None]:
    """str.format / Rust format! / {name}: literal parts and None per field."""
    parts: list[str | None] = []
    pos = 0
    for found in _BRACE_RE.finditer(fmt):
        parts.append(fmt[pos : found.start()])
        token = found.group()
        parts.append("{" if token == "{{" else "}" if token == "}}" else None)
        pos = found.end()
    parts.append(fmt[pos:])
    return parts


# -- Python ----------------------------------------------------------------------------------------

_LOG_LEVELS = {
    "error": "error",
    "exception": "error",
    "critical": "critical",
    "fatal": "critical",
    "warning": "warning",
    "warn": "warning",
    "error_once": "error",
    "warning_once": "warning",
}
_LOGGER_NAME = re.compile(r"(?:^|_)(?:logger|log|LOG|LOGGER|logging)$|^logger")


def _py_parts(
    node: ast.expr, names: dict[str, list[ast.expr]], depth: int = 0
) -> list[str | None] | None:
    """The literal parts of a string expression, None for each placeholder; None if not a string."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        out: list[str | None] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            elif isinstance(value, ast.FormattedValue) and _constant(value, names) is not None:
                out.append(_constant(value, names))  # f"{_ERR_MSG_PREFIX}{name!r}"
            else:
                out.append(None)
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = node.left
        if isinstance(left, ast.Constant) and isinstance(left.value, str):
            return split_percent(left.value)
        inner = _py_parts(left, names, depth + 1)
        return None if inner is None else [None if p is None else p for p in inner]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        lhs = _py_parts(node.left, names, depth + 1)
        rhs = _py_parts(node.right, names, depth + 1)
        if lhs is None and rhs is None:
            return None
        return (lhs or [None]) + (rhs or [None])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "format":
            base = node.func.value
            if isinstance(base, ast.Constant) and isinstance(base.value, str):
                return split_braces(base.value)
        if node.func.attr == "join" and node.args:
            return [None]
    if isinstance(node, ast.Name) and node.id in names:
        for value in names[node.id]:
            parts = _py_parts(value, names, depth + 1)
            if parts is not None:
                return parts
    return None


def _constant(value: ast.FormattedValue, names: dict[str, list[ast.expr]]) -> str | None:
    """The text of an f-string field that names a string constant (a module-level NAME = "...",
    the one assignment of that name): the runtime prints the constant there, not a variable."""
    if value.conversion != -1 or value.format_spec is not None:
        return None
    if not isinstance(value.value, ast.Name):
        return None
    found = names.get(value.value.id, [])
    if len(found) == 1 and isinstance(found[0], ast.Constant) and isinstance(found[0].value, str):
        return found[0].value
    return None


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


class _PyVisitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.scope: list[str] = []
        self.names: list[dict[str, list[ast.expr]]] = [{}]
        self.found: list[Message] = []

    def _emit(self, parts: list[str | None] | None, kind: str, line: int) -> None:
        if parts is None:
            return
        function = ".".join(self.scope)
        for template in normalise(parts):
            self.found.append(Message(template, kind, function, line))

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        names: dict[str, list[ast.expr]] = {k: list(v) for k, v in self.names[0].items()}
        if not isinstance(node, ast.ClassDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                    target = sub.targets[0]
                    if isinstance(target, ast.Name):
                        names.setdefault(target.id, []).append(sub.value)
                elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                    names.setdefault(sub.target.id, []).append(sub.value)
        self.names.append(names)
        self.generic_visit(node)
        self.names.pop()
        self.scope.pop()

    visit_FunctionDef = _scoped
    visit_AsyncFunctionDef = _scoped
    visit_ClassDef = _scoped

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            kind = _call_name(exc.func) or "raise"
            self._emit(_py_parts(exc.args[0], self.names[-1]), kind, node.lineno)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._emit(_py_parts(node.msg, self.names[-1]), "AssertionError", node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            owner = func.value
            owner_name = (
                owner.id
                if isinstance(owner, ast.Name)
                else (owner.attr if isinstance(owner, ast.Attribute) else "")
            )
            if func.attr in _LOG_LEVELS and _LOGGER_NAME.search(owner_name):
                parts = _py_parts(node.args[0], self.names[-1])
                if parts is not None and len(node.args) > 1:
                    # logging %-formats the message with the call's own arguments
                    parts = [q for p in parts for q in ([None] if p is None else split_percent(p))]
                self._emit(parts, f"logger.{_LOG_LEVELS[func.attr]}", node.lineno)
            elif func.attr == "warn" and owner_name == "warnings":
                category = "UserWarning"
                if len(node.args) > 1:
                    category = _call_name(node.args[1]) or category
                for kw in node.keywords:
                    if kw.arg == "category":
                        category = _call_name(kw.value) or category
                self._emit(_py_parts(node.args[0], self.names[-1]), category, node.lineno)
        elif isinstance(func, ast.Name) and func.id == "warn" and node.args:
            self._emit(_py_parts(node.args[0], self.names[-1]), "UserWarning", node.lineno)
        self.generic_visit(node)


def python_messages(source: str) -> list[Message]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    visitor = _PyVisitor()
    for stmt in tree.body:  # module-level string constants, seen by every scope
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            visitor.names[0].setdefault(stmt.targets[0].id, []).append(stmt.value)
    try:
        visitor.visit(tree)
    except RecursionError:
        return []
    return visitor.found


# -- C, C++, CUDA ----------------------------------------------------------------------------------

# call name -> (kind, index of the format/first message argument, style)
#   style "printf": that argument is a printf format; "concat": every argument from that index on is
#   concatenated (c10::str, TORCH_CHECK); "stream": a `<<` chain follows the call.
C_CALLS: dict[str, tuple[str, int, str]] = {
    "WARN": ("NCCL WARN", 0, "printf"),
    "TORCH_CHECK": ("TORCH_CHECK", 1, "concat"),
    "TORCH_CHECK_VALUE": ("TORCH_CHECK_VALUE", 1, "concat"),
    "TORCH_CHECK_INDEX": ("TORCH_CHECK_INDEX", 1, "concat"),
    "TORCH_CHECK_TYPE": ("TORCH_CHECK_TYPE", 1, "concat"),
    "TORCH_CHECK_NOT_IMPLEMENTED": ("TORCH_CHECK_NOT_IMPLEMENTED", 1, "concat"),
    "TORCH_CHECK_WITH": ("TORCH_CHECK", 2, "concat"),
    "TORCH_INTERNAL_ASSERT": ("TORCH_INTERNAL_ASSERT", 1, "concat"),
    "TORCH_WARN": ("TORCH_WARN", 0, "concat"),
    "TORCH_WARN_ONCE": ("TORCH_WARN", 0, "concat"),
    "AT_ERROR": ("AT_ERROR", 0, "concat"),
    "C10_THROW_ERROR": ("C10_THROW_ERROR", 1, "concat"),
    "C10D_THROW_ERROR": ("C10D_THROW_ERROR", 1, "concat"),
    "C10D_NCCL_ERROR": ("C10D_NCCL_ERROR", 0, "concat"),
    "FLASHINFER_CHECK": ("FLASHINFER_CHECK", 1, "concat"),
    "FLASHINFER_ERROR": ("FLASHINFER_ERROR", 0, "concat"),
    "XGRAMMAR_CHECK": ("XGRAMMAR_CHECK", 1, "stream"),
    "XGRAMMAR_LOG": ("XGRAMMAR_LOG", 1, "stream"),
    "LOG": ("LOG", 1, "stream"),
    "error_setx": ("error", 1, "printf"),
    "error_set": ("error", 1, "printf"),
    "error_set_elf": ("error", 2, "printf"),
    "error_set_rpc": ("error", 2, "printf"),
    "log_errf": ("log error", 0, "printf"),
    "log_warnf": ("log warning", 0, "printf"),
    "log_err": ("log error", 0, "printf"),
    "log_warn": ("log warning", 0, "printf"),
    "nv_printf": ("nv_printf", 1, "printf"),
    "NV_DEV_PRINTF": ("NV_DEV_PRINTF", 2, "printf"),
    "NV_DEV_PRINTF_STATUS": ("NV_DEV_PRINTF", 3, "printf"),
    "NV_PRINTF": ("NV_PRINTF", 1, "printf"),
    "NV_ASSERT_PRINTF": ("NV_PRINTF", 1, "printf"),
    "NV_ERROR_LOG": ("NV_ERROR_LOG", 2, "printf"),
    "nvErrorLog_va": ("NV_ERROR_LOG", 2, "printf"),
    "fprintf": ("fprintf", 1, "printf"),
    "throw std::runtime_error": ("std::runtime_error", 0, "concat"),
    "throw std::invalid_argument": ("std::invalid_argument", 0, "concat"),
    # the driver's unleveled console print (its text carries the NVRM: prefix)
    "portDbgPrintf": ("portDbgPrintf", 0, "printf"),
    # CPython's own exceptions (the class is an argument: see _C_CLASS_ARG)
    "PyErr_Format": ("PyErr_Format", 1, "pyformat"),
    "_PyErr_Format": ("PyErr_Format", 2, "pyformat"),
    "PyErr_SetString": ("PyErr_SetString", 1, "pyformat"),
    "_PyErr_SetString": ("PyErr_SetString", 2, "pyformat"),
    "type_error": ("TypeError", 0, "pyformat"),
    "_PyEval_FormatExcCheckArg": ("PyErr_Format", 2, "pyformat"),  # NameError's NAME_ERROR_MSG
}
# systemd's log calls: name -> index of the format; the level is in the name, or an argument
# (log_full, log_unit_full: index 0 / 1), or absent (LOG_UNIT_MESSAGE inside log_unit_struct)
for _lvl in ("notice", "warning", "error", "crit", "alert", "emergency", "emerg"):
    C_CALLS[f"log_{_lvl}"] = (f"log_{_lvl}", 0, "printf")
    C_CALLS[f"log_{_lvl}_errno"] = (f"log_{_lvl}", 1, "printf")
    C_CALLS[f"log_unit_{_lvl}"] = (f"log_{_lvl}", 1, "printf")
    C_CALLS[f"log_unit_{_lvl}_errno"] = (f"log_{_lvl}", 2, "printf")
C_CALLS.update(
    {
        "log_full": ("log", 1, "printf"),
        "log_full_errno": ("log", 2, "printf"),
        "log_unit_full": ("log", 2, "printf"),
        "log_unit_full_errno": ("log", 3, "printf"),
        "LOG_UNIT_MESSAGE": ("LOG_UNIT_MESSAGE", 1, "unitprintf"),
        "LOG_MESSAGE": ("LOG_MESSAGE", 0, "printf"),
    }
)
# the argument that names the exception class (PyExc_TypeError -> TypeError)
_C_CLASS_ARG = {
    "PyErr_Format": 0,
    "_PyErr_Format": 1,
    "PyErr_SetString": 0,
    "_PyErr_SetString": 1,
    "_PyEval_FormatExcCheckArg": 1,
}
# the argument that holds a level (kept in the call kind: severity comes from it)
_C_LEVEL_ARG = {
    "nv_printf": 0,
    "NV_DEV_PRINTF": 0,
    "NV_DEV_PRINTF_STATUS": 0,
    "NV_PRINTF": 0,
    "NV_ASSERT_PRINTF": 0,
    "log_full": 0,
    "log_full_errno": 0,
    "log_unit_full": 1,
    "log_unit_full_errno": 1,
}
# printf calls that only count when the first argument says so (stderr, error levels)
_C_LEVEL_FILTER = {
    "fprintf": re.compile(r"^\s*stderr\s*$"),
    "nv_printf": re.compile(r"NV_DBG_(?:ERRORS|WARNINGS)"),
    "NV_DEV_PRINTF": re.compile(r"NV_DBG_(?:ERRORS|WARNINGS)"),
    "NV_DEV_PRINTF_STATUS": re.compile(r"NV_DBG_(?:ERRORS|WARNINGS)"),
    "NV_PRINTF": re.compile(r"LEVEL_(?:ERROR|WARNING)"),
    "NV_ASSERT_PRINTF": re.compile(r"LEVEL_(?:ERROR|WARNING)"),
    "LOG": re.compile(r"ERROR|WARNING|FATAL"),
    "XGRAMMAR_LOG": re.compile(r"WARNING|FATAL|ERROR"),
    # systemd: anything but the debug and info levels (a variable level is kept: its text decides)
    "log_full": re.compile(r"^(?!\s*LOG_(?:DEBUG|INFO)\s*$)"),
    "log_full_errno": re.compile(r"^(?!\s*LOG_(?:DEBUG|INFO)\s*$)"),
    "log_unit_full": re.compile(r"^(?!\s*LOG_(?:DEBUG|INFO)\s*$)"),
    "log_unit_full_errno": re.compile(r"^(?!\s*LOG_(?:DEBUG|INFO)\s*$)"),
}
_C_LEVEL_WORD = re.compile(r"NV_DBG_\w+|LEVEL_\w+|LOG_[A-Z]+")
_C_CALL_RE = re.compile(
    r"\b(?:throw\s+std::(?:runtime_error|invalid_argument)|"
    + "|".join(re.escape(k) for k in sorted(C_CALLS, key=len, reverse=True) if " " not in k)
    + r")\s*\("
)
_C_STRING_RE = re.compile(r'(?:u8|L|u|U)?"((?:[^"\\\n]|\\.)*)"')
_C_ESCAPES = {"n": "\n", "t": " ", "\\": "\\", '"': '"', "'": "'", "r": "", "0": ""}


def _c_unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _C_ESCAPES.get(m.group(1), ""), text)


def _c_args(src: str, start: int) -> tuple[list[str], int]:
    """Split a call's arguments at top-level commas; start is just after '('. Returns (args, end)."""
    depth = 0
    args: list[str] = []
    cur: list[str] = []
    i = start
    n = len(src)
    while i < n:
        ch = src[i]
        if ch == '"' or ch == "'":
            j = i + 1
            while j < n and src[j] != ch:
                j += 2 if src[j] == "\\" else 1
            cur.append(src[i : j + 1])
            i = j + 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                args.append("".join(cur))
                return args, i + 1
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur))
            cur = []
            i += 1
            continue
        elif ch == ";" and depth == 0:
            break
        cur.append(ch)
        i += 1
        if i - start > 4000:
            break
    return [], i


def _c_literal(arg: str) -> str | None:
    """The text of an argument made only of adjacent string literals (macros between them are
    placeholders), else None."""
    strings = list(_C_STRING_RE.finditer(arg))
    if not strings:
        return None
    rest = _C_STRING_RE.sub("", arg).strip()
    if rest and not re.fullmatch(r"[\sA-Z0-9_]*", rest):
        return None
    out = []
    pos = 0
    for found in strings:
        between = arg[pos : found.start()].strip()
        if between:
            out.append("\x00")  # a macro such as PRIu64 between literals
        out.append(_c_unescape(found.group(1)))
        pos = found.end()
    return "".join(out)


def _printf_parts(fmt: str) -> list[str | None]:
    parts: list[str | None] = []
    for piece in fmt.split("\x00"):
        if parts:
            parts.append(None)
        parts.extend(split_percent(piece))
    return parts


# CPython's PyUnicode_FromFormat conversions: printf's and %R %S %A %U %V %T %N (objects)
_PYFORMAT_RE = re.compile(r"%(?:\.\d+)?(?:zd|zu|lld|llu|ld|lu|[diuxcspRSAUVTN%])")


def _pyformat_parts(fmt: str) -> list[str | None]:
    parts: list[str | None] = []
    for piece in fmt.split("\x00"):
        if parts:
            parts.append(None)
        pos = 0
        for found in _PYFORMAT_RE.finditer(piece):
            parts.append(piece[pos : found.start()])
            parts.append("%" if found.group() == "%%" else None)
            pos = found.end()
        parts.append(piece[pos:])
    return parts


def _concat_parts(args: list[str]) -> list[str | None] | None:
    parts: list[str | None] = []
    literal_seen = False
    for arg in args:
        text = _c_literal(arg)
        if text is None:
            parts.append(None)
        else:
            literal_seen = True
            parts.extend(None if i % 2 else p for i, p in enumerate(text.split("\x00")))
    return parts if literal_seen else None


def _stream_parts(src: str, pos: int) -> list[str | None] | None:
    """The `<< a << "lit"` chain after a LOG(...) call, up to the statement's end."""
    end = src.find(";", pos)
    if end < 0 or end - pos > 2000:
        return None
    chain = src[pos:end]
    if "<<" not in chain:
        return None
    pieces = chain.split("<<")[1:]
    return _concat_parts(pieces)


_C_HEADER_RE = re.compile(
    r"([A-Za-z_~][\w:~<>]*)\s*\([^;{}]*\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?::[^;{}]*)?$"
)
_C_INSTRUCTION_RE = re.compile(
    r"^(?:inst|op|tier1\s+inst|replaced\s+op|specializing\s+op)\(\s*(\w+)"
)
_C_COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_C_CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "defined", "do", "else"}


_ELSE_RE = re.compile(r"#[ \t]*(?:else|elif)\b")
_COND_RE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b", re.M)


def _directive_end(src: str, start: int) -> int:
    """The end of the preprocessor line at `start` (continued with backslashes); -1 at EOF."""
    j = start
    while True:
        j = src.find("\n", j)
        if j < 0 or src[j - 1] != "\\":
            return j
        j += 1


def _endif_of(src: str, start: int) -> int:
    """Just before the #endif that closes the conditional whose #else/#elif ends at `start`."""
    depth = 0
    for found in _COND_RE.finditer(src, start):
        if found.group(1) != "endif":
            depth += 1
        elif depth == 0:
            return found.start()
        else:
            depth -= 1
    return len(src)


@lru_cache(maxsize=2)
def _c_functions(src: str) -> list[tuple[int, str]]:
    """(offset, enclosing function) at each '{' and '}' that changes the innermost function:
    a brace tracker that knows namespaces, classes and control blocks apart from functions."""
    marks: list[tuple[int, str]] = [(0, "")]
    stack: list[str] = []  # per open brace: the function name it opens, or the enclosing one
    i = 0
    n = len(src)
    header_start = 0
    while i < n:
        ch = src[i]
        if ch == '"' or ch == "'":
            j = i + 1
            while j < n and src[j] != ch and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if ch == "#" and (i == 0 or src[i - 1] == "\n"):
            j = _directive_end(src, i)
            if _ELSE_RE.match(src, i):
                # only the first branch of an #if counts: `#ifdef X { ... #else { ...` would
                # open two braces for one (CPython's dictobject.c)
                j = _endif_of(src, j)
            i = n if j < 0 else j
            header_start = i
            continue
        if ch == "{":
            # comments out of the header: a file's leading "(c) ..." is not a parameter list
            header = _C_COMMENT_RE.sub(" ", src[header_start:i]).strip()
            current = stack[-1] if stack else ""
            name = current
            if not current:
                found = _C_HEADER_RE.search(header)
                if found and found.group(1).split("::")[-1] not in _C_CONTROL:
                    name = found.group(1)
            else:  # CPython's bytecodes.c: `inst(LOAD_NAME, ...) {` inside its dummy_func
                instr = _C_INSTRUCTION_RE.search(header)
                name = instr.group(1) if instr else current
            stack.append(name)
            marks.append((i, name))
            header_start = i + 1
        elif ch == "}":
            if stack:
                stack.pop()
            marks.append((i, stack[-1] if stack else ""))
            header_start = i + 1
        elif ch == ";":
            header_start = i + 1
        i += 1
    return marks


_C_STRING_MACRO_RE = re.compile(
    r'^#\s*define\s+([A-Z_][A-Z0-9_]*)\s+((?:"(?:[^"\\\n]|\\.)*"\s*)+)$', re.M
)


def string_macros(src: str) -> dict[str, str]:
    """`#define NAME_ERROR_MSG "name '%.200s' is not defined"`: macros that are one string."""
    found: dict[str, str] = {}
    for m in _C_STRING_MACRO_RE.finditer(src):  # the first of #if/#else alternatives
        found.setdefault(m.group(1), m.group(2).strip())
    return found


def _expand_macros(arg: str, macros: dict[str, str]) -> str:
    """String macros in place, outside the argument's own string literals."""
    out: list[str] = []
    pos = 0
    for lit in _C_STRING_RE.finditer(arg):
        out.append(
            _MACRO_TOKEN_RE.sub(lambda m: macros.get(m.group(), m.group()), arg[pos : lit.start()])
        )
        out.append(lit.group())
        pos = lit.end()
    out.append(_MACRO_TOKEN_RE.sub(lambda m: macros.get(m.group(), m.group()), arg[pos:]))
    return "".join(out)


_MACRO_TOKEN_RE = re.compile(r"\b[A-Z_][A-Z0-9_]{2,}\b")


# Calls that are a log call only in one project (Slurm's `error()` is any C program's name):
# project -> {call name: (kind, index of the format, style)}. Style "bare-stream": a macro with no
# parentheses that a `<<` chain follows (NIXL's `NIXL_ERROR << ...`).
PROJECT_C_CALLS: dict[str, dict[str, tuple[str, int, str]]] = {
    # Slurm's log.c: error() and fatal() print "error: " / "fatal: " before the message
    "slurm": {
        "error": ("error()", 0, "printf"),
        "fatal": ("fatal()", 0, "printf"),
        "slurm_error": ("slurm_error", 0, "printf"),
    },
    # pyxis (a SPANK plugin) logs through Slurm's slurm_error(): "error: pyxis: ..."
    "pyxis": {"slurm_error": ("slurm_error", 0, "printf")},
    # the C++ runtime's verbose terminate handler (`terminate called after throwing ...`)
    "libstdc++": {"fputs": ("fputs(stderr)", 0, "printf")},
    "nixl": {
        "NIXL_ERROR": ("NIXL_ERROR", 0, "bare-stream"),
        "NIXL_WARN": ("NIXL_WARN", 0, "bare-stream"),
    },
}


def _project_calls(src: str, calls: dict[str, tuple[str, int, str]]) -> list[Message]:
    """The messages of one project's own log calls (PROJECT_C_CALLS)."""
    out: list[Message] = []
    names = "|".join(re.escape(k) for k in sorted(calls, key=len, reverse=True))
    for call in re.finditer(rf"(?<![\w.>])({names})\s*(\(|<<)", src):
        kind, index, style = calls[call.group(1)]
        if style == "bare-stream":
            if call.group(2) != "<<":
                continue
            parts = _stream_parts(src, call.end() - 2)
        else:
            if call.group(2) != "(":
                continue
            args, _ = _c_args(src, call.end())
            fmt = _c_literal(args[index]) if len(args) > index else None
            parts = _printf_parts(fmt) if fmt is not None else None
        if parts is None:
            continue
        function = _bisect_mark(_c_functions(src), call.start())
        line = src.count("\n", 0, call.start()) + 1
        out.extend(Message(t, kind, function, line) for t in normalise(parts))
    return out


def c_messages(src: str, macros: dict[str, str] | None = None, project: str = "") -> list[Message]:
    """Every message of one C, C++ or CUDA file; `macros` are string macros of the release's
    headers, put in place where an argument is one (CPython's NAME_ERROR_MSG); `project` adds
    that project's own log calls (PROJECT_C_CALLS)."""
    found: list[Message] = []
    if project in PROJECT_C_CALLS:
        found.extend(_project_calls(src, PROJECT_C_CALLS[project]))
    marks: list[tuple[int, str]] | None = None
    line_starts: list[int] | None = None
    own = string_macros(src) if "#" in src else {}
    macros = {**own, **(macros or {})} if own else macros
    for call in _C_CALL_RE.finditer(src):
        name = re.sub(r"\s+", " ", call.group()[:-1].strip())
        name = "throw " + name.split("throw", 1)[1].strip() if name.startswith("throw") else name
        if name not in C_CALLS:
            continue
        kind, index, style = C_CALLS[name]
        args, end = _c_args(src, call.end())
        if not args:
            continue
        if macros:
            args = [_expand_macros(a, macros) for a in args]
        level = _C_LEVEL_FILTER.get(name)
        level_arg = args[_C_LEVEL_ARG.get(name, 0)] if len(args) > _C_LEVEL_ARG.get(name, 0) else ""
        if level is not None and not level.search(level_arg):
            continue
        if name in _C_LEVEL_ARG:  # the level the call names, or none (a variable): in the kind
            word = _C_LEVEL_WORD.search(level_arg)
            kind = f"{kind}({word.group()})" if word else kind
        if name in _C_CLASS_ARG:
            at = _C_CLASS_ARG[name]
            cls = re.search(r"PyExc_(\w+)", args[at]) if len(args) > at else None
            if cls is None:
                continue
            kind = cls.group(1)
        if style in ("pyformat", "unitprintf"):
            if len(args) <= index:
                continue
            fmt = _c_literal(args[index])
            if fmt is None:
                continue
            if style == "unitprintf":  # LOG_UNIT_MESSAGE prefixes the unit's name
                fmt = "%s: " + fmt
            parts: list[str | None] | None = (
                _printf_parts(fmt) if style == "unitprintf" else _pyformat_parts(fmt)
            )
        elif style == "printf":
            if len(args) <= index:
                continue
            fmt = _c_literal(args[index])
            if fmt is None:
                continue
            parts = _printf_parts(fmt)
        elif style == "stream":
            parts = _stream_parts(src, end)
        else:
            parts = _concat_parts(args[index:])
        if parts is None:
            continue
        templates = normalise(parts)
        if not templates:
            continue
        if marks is None:
            marks = _c_functions(src)
            line_starts = [0] + [m.end() for m in re.finditer("\n", src)]
        assert line_starts is not None
        offset = call.start()
        function = _bisect_mark(marks, offset)
        line = _bisect_line(line_starts, offset)
        if name in ("LOG", "XGRAMMAR_LOG"):
            kind = f"{kind}({args[0].strip()})"
        found.extend(Message(t, kind, function, line) for t in templates)
    found.extend(_c_error_strings(src))
    found.extend(_c_built_strings(src))
    found.extend(_c_stream_throws(src))
    return found


def _c_stream_throws(src: str) -> list[Message]:
    """A message streamed into an ostringstream and thrown as its .str(): the `var << ...;`
    statements of the 1500 characters before the throw, in order."""
    out: list[Message] = []
    for throw in _C_STREAM_THROW_RE.finditer(src):
        var = throw.group(2)
        window_start = max(0, throw.start() - 1500)
        window = src[window_start : throw.start()]
        parts: list[str | None] = []
        for stmt in re.finditer(rf"\b{re.escape(var)}\s*(<<[^;]*);", window):
            more = _concat_parts(stmt.group(1).split("<<")[1:])
            if more:
                parts.extend(more)
        if not parts:
            continue
        line = src.count("\n", 0, throw.start()) + 1
        where = _bisect_mark(_c_functions(src), throw.start())
        kind = f"std::{throw.group(1)}"
        out.extend(Message(t, kind, where, line) for t in normalise(parts))
    return out


_C_BUILT_RE = re.compile(
    r"(?:\bstd::string\s+|^[ \t]*)(\w*(?:err|Err|msg|Msg|message|Message|error|Error|interpret)\w*)"
    r'\s*\+?=\s*(?=")',
    re.M,
)
# `ss << "shape '" << shape << "' is invalid ..."; throw std::runtime_error(ss.str());`
_C_STREAM_THROW_RE = re.compile(r"\bthrow\s+std::(\w+)\(\s*(\w+)\.str\(\)\s*\)")


def _c_built_strings(src: str) -> list[Message]:
    """`std::string err = "NCCL error in: " + ... ;`: a message assembled with `+` (torch's
    NCCL checks build theirs this way, inside macros)."""
    out: list[Message] = []
    for found in _C_BUILT_RE.finditer(src):
        end = src.find(";", found.end())
        if end < 0 or end - found.end() > 1500:
            continue
        expr = src[found.end() : end].replace("\\\n", " ")
        pieces = _split_plus(expr)
        parts = _concat_parts(pieces)
        if parts is None:
            continue
        line = src.count("\n", 0, found.start()) + 1
        where = _macro_at(src, found.start()) or _bisect_mark(_c_functions(src), found.start())
        out.extend(Message(t, "error string", where, line) for t in normalise(parts))
    return out


def _split_plus(expr: str) -> list[str]:
    """Top-level `+` operands of an expression (strings and parentheses respected)."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch == '"':
            j = i + 1
            while j < len(expr) and expr[j] != '"':
                j += 2 if expr[j] == "\\" else 1
            cur.append(expr[i : j + 1])
            i = j + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "+" and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def _macro_at(src: str, offset: int) -> str:
    """The macro whose #define (continued with backslashes) holds this offset, else ""."""
    start = src.rfind("#define", 0, offset)
    if start < 0:
        return ""
    body = src[start:offset]
    lines = body.split("\n")
    if any(not ln.rstrip().endswith("\\") for ln in lines[:-1]):
        return ""
    found = re.match(r"#define\s+(\w+)", body)
    return found.group(1) if found else ""


def _c_error_strings(src: str) -> list[Message]:
    """`case ncclX: return "...";` of an error-string function (ncclGetErrorString and kin)."""
    out: list[Message] = []
    for fn in re.finditer(
        r"\b(\w*(?:ErrorString|ErrorStr|GetErrorString|errorString)\w*)\s*\([^;{}]*\)\s*\{", src
    ):
        body_end = src.find("\n}", fn.end())
        body = src[fn.end() : body_end if body_end > 0 else fn.end() + 4000]
        for ret in re.finditer(r'case\s+(\w+)\s*:\s*return\s+((?:"(?:[^"\\\n]|\\.)*"\s*)+);', body):
            text = _c_literal(ret.group(2))
            if text is None:
                continue
            line = src.count("\n", 0, fn.end() + ret.start()) + 1
            kind = f"error string {ret.group(1)}"
            out.extend(Message(t, kind, fn.group(1), line) for t in normalise(_printf_parts(text)))
    return out


def _bisect_mark(marks: list[tuple[int, str]], offset: int) -> str:
    lo, hi = 0, len(marks)
    while lo < hi:
        mid = (lo + hi) // 2
        if marks[mid][0] <= offset:
            lo = mid + 1
        else:
            hi = mid
    return marks[lo - 1][1] if lo else ""


def _bisect_line(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts)
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo


# -- Go --------------------------------------------------------------------------------------------

_GO_CALL_RE = re.compile(
    r"\b(fmt\.Errorf|errors\.New|(?:\w+\.)*(?:Errorf|Warningf|Warnf|Error|Warning|Warn|Fatalf|Fatal))\(\s*"
    r'("(?:[^"\\\n]|\\.)*"|`[^`]*`)'
)
_GO_FUNC_RE = re.compile(r"^func\s+(?:\(\s*\w*\s*\*?(\w+)[^)]*\)\s*)?(\w+)", re.M)


_GO_RETURN_RE = re.compile(r'\breturn\s+("(?:[^"\\\n]|\\.)*"|`[^`]*`)')


def go_messages(src: str) -> list[Message]:
    out: list[Message] = []
    funcs = [
        (m.start(), f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2))
        for m in _GO_FUNC_RE.finditer(src)
    ]
    # an error type's Error() method: the string literals it returns are the error's text
    for i, (start, fname) in enumerate(funcs):
        if not fname.endswith(".Error"):
            continue
        end = funcs[i + 1][0] if i + 1 < len(funcs) else len(src)
        for ret in _GO_RETURN_RE.finditer(src, start, end):
            lit = ret.group(1)
            text = lit[1:-1] if lit.startswith("`") else _c_unescape(lit[1:-1])
            line = src.count("\n", 0, ret.start()) + 1
            out.extend(Message(t, "error", fname, line) for t in normalise(_go_verbs(text)))
    for call in _GO_CALL_RE.finditer(src):
        name = call.group(1)
        lit = call.group(2)
        text = lit[1:-1] if lit.startswith("`") else _c_unescape(lit[1:-1])
        if name in ("fmt.Errorf", "errors.New"):
            kind = "error"
        else:
            short = name.rsplit(".", 1)[-1].rstrip("f")
            kind = (
                "log "
                + {"Warn": "warning", "Warning": "warning", "Error": "error", "Fatal": "fatal"}[
                    short
                ]
            )
        text = text.replace("%w", "%v")
        function = ""
        for start, fname in funcs:
            if start > call.start():
                break
            function = fname
        line = src.count("\n", 0, call.start()) + 1
        out.extend(Message(t, kind, function, line) for t in normalise(_go_verbs(text)))
    return out


def _go_verbs(fmt: str) -> list[str | None]:
    parts: list[str | None] = []
    pos = 0
    for found in re.finditer(r"%%|%[-+# 0]*\d*(?:\.\d+)?[vTtbcdoOqxXUeEfFgGsp]", fmt):
        parts.append(fmt[pos : found.start()])
        parts.append("%" if found.group() == "%%" else None)
        pos = found.end()
    parts.append(fmt[pos:])
    return parts


# -- Rust ------------------------------------------------------------------------------------------

_RUST_RE = re.compile(
    r'(?:#\[error\(|(\w+)::new_err\(\s*(?:format!\(\s*)?|panic!\(|bail!\(|anyhow!\(|\.expect\()\s*"((?:[^"\\]|\\.)*)"'
)
_RUST_FN_RE = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+(\w+)|^\s*(?:pub\s+)?(?:enum|struct)\s+(\w+)",
    re.M,
)


# pydantic-core builds its exceptions' text (ValidationError's title line) with format!/write!
_RUST_FORMAT_RE = re.compile(r'(?:\bformat!\(|\bwrite!\(\s*\w+\s*,)\s*"((?:[^"\\]|\\.)*)"')


def rust_messages(src: str, formats: bool = False) -> list[Message]:
    out: list[Message] = []
    items = [(m.start(), m.group(1) or m.group(2)) for m in _RUST_FN_RE.finditer(src)]
    if formats:
        for call in _RUST_FORMAT_RE.finditer(src):
            function = ""
            for start, name in items:
                if start > call.start():
                    break
                function = name
            text = _c_unescape(call.group(1).replace("\\\n", ""))
            line = src.count("\n", 0, call.start()) + 1
            out.extend(Message(t, "format!", function, line) for t in normalise(split_braces(text)))
    for call in _RUST_RE.finditer(src):
        head = call.group()
        if head.startswith("#[error"):
            kind = "error"
        elif call.group(1):
            kind = call.group(1)
        else:
            kind = "panic" if "panic" in head or "expect" in head else "error"
        text = _c_unescape(call.group(2).replace("\\\n", ""))
        function = ""
        for start, name in items:
            if start > call.start():
                break
            function = name
        line = src.count("\n", 0, call.start()) + 1
        out.extend(Message(t, kind, function, line) for t in normalise(split_braces(text)))
    return out


EXTRACTORS: dict[str, Callable[[str], list[Message]]] = {
    ".py": python_messages,
    ".c": c_messages,
    ".cc": c_messages,
    ".cpp": c_messages,
    ".cu": c_messages,
    ".cuh": c_messages,
    ".h": c_messages,
    ".hpp": c_messages,
    ".go": go_messages,
    ".rs": rust_messages,
}


# -- sources ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Project:
    name: str
    repo: str  # https://github.com/<owner>/<name>
    tag: str  # release -> tag, e.g. "v{release}"
    strip: str  # regex removed from archive paths to get the repository path
    keep: str  # regex a repository path must match to be read
    repo_prefix: str = ""  # prepended to the stripped path for the link (e.g. "python/")
    exts: tuple[str, ...] = (".py",)
    renames: tuple[tuple[str, str], ...] = ()  # (regex, replacement): archive path -> repo path
    macro_files: str = ""  # regex: headers whose string #defines C messages may use
    rust_formats: bool = False  # Rust: format!/write! texts too (pydantic-core's exceptions)


_SKIP = re.compile(
    r"(?:^|/)(?:tests?|testing|test_utils|examples?|benchmarks?/kernels|docs?|third[_-]party|vendor|_vendor)/|(?:^|/)test_[^/]*$|_test\.(?:go|py|cc|cpp)$|conftest\.py$"
)

PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        Project("vllm", "https://github.com/vllm-project/vllm", "v{release}", r"^", r"^vllm/"),
        Project(
            "sglang",
            "https://github.com/sgl-project/sglang",
            "v{release}",
            r"^",
            r"^sglang/",
            "python/",
        ),
        Project(
            "torch",
            "https://github.com/pytorch/pytorch",
            "v{release}",
            r"^(?:torch/include/)?",
            r"^(?:torch/|c10/|ATen/|torch/csrc/)",
            exts=(".py", ".h", ".hpp", ".cuh"),
            renames=((r"^ATen/", "aten/src/ATen/"),),  # the wheel's include/ATen is aten/src/ATen
        ),
        # pydantic-core: the text of pydantic's ValidationError (vLLM's configs are pydantic)
        Project(
            "pydantic-core",
            "https://github.com/pydantic/pydantic-core",
            "v{release}",
            r"^",
            r"^src/",
            exts=(".rs",),
            rust_formats=True,
        ),
        # PyTorch's C++ sources (.cpp/.cu: the wheels ship only headers), from Debian's source
        # package of one release: c10d, ProcessGroupNCCL, the CUDA caching allocator, ATen's checks
        Project(
            "torch-cpp",
            "https://github.com/pytorch/pytorch",
            "v{release}",
            r"^[^/]+/",
            r"^(?:torch/csrc/(?:distributed|cuda|autograd|utils)/|c10/(?:core|cuda|util)/|"
            r"aten/src/ATen/(?:[^/]+\.cpp$|core/|cuda/|native/[^/]+\.cpp$|native/cuda/))",
            exts=(".cpp", ".cc", ".cu"),
        ),
        # systemd (service manager, units, systemctl, networkd's wait-online), from Debian's
        # source packages (the GitHub snapshot is over the fetch limit)
        Project(
            "systemd",
            "https://github.com/systemd/systemd",
            "v{release}",
            r"^[^/]+/",
            r"^src/(?:core|systemctl|network)/",
            exts=(".c",),
        ),
        # the Python runtime's own messages (No module named, not supported between instances):
        # its import machinery in Lib/ and the C of Objects/ and Python/, from Debian's source
        Project(
            "cpython",
            "https://github.com/python/cpython",
            "v{release}",
            r"^[^/]+/",
            r"^(?:Lib/(?:importlib/|argparse\.py|multiprocessing/|concurrent/|asyncio/|"
            r"subprocess\.py|json/|ssl\.py|socket\.py|shutil\.py|os\.py|pickle\.py)|"
            r"Objects/|Python/)",
            exts=(".py", ".c"),
            macro_files=r"^Python/ceval_macros\.h$",
        ),
        Project(
            "nccl",
            "https://github.com/NVIDIA/nccl",
            "v{release}-1",
            r"^",
            r"^src/",
            exts=(".cc", ".cu", ".h"),
        ),
        Project(
            "transformers",
            "https://github.com/huggingface/transformers",
            "v{release}",
            r"^[^/]+/",
            r"^src/transformers/",
        ),
        Project(
            "huggingface_hub",
            "https://github.com/huggingface/huggingface_hub",
            "v{release}",
            r"^[^/]+/",
            r"^src/huggingface_hub/",
        ),
        Project(
            "tokenizers",
            "https://github.com/huggingface/tokenizers",
            "{release}",
            r"^",
            r"^(?:tokenizers/src/|bindings/python/src/|bindings/python/py_src/)",
            exts=(".rs", ".py"),
        ),
        Project(
            "safetensors",
            "https://github.com/huggingface/safetensors",
            "{release}",
            r"^",
            r"^(?:safetensors/src/|bindings/python/src/|bindings/python/py_src/)",
            exts=(".rs", ".py"),
        ),
        Project(
            "triton",
            "https://github.com/triton-lang/triton",
            "v{release}",
            r"^",
            r"^triton/",
            "python/",
        ),
        Project(
            "flashinfer",
            "https://github.com/flashinfer-ai/flashinfer",
            "v{release}",
            r"^(?:flashinfer/data/)?",  # the wheel ships its csrc/ and include/ under data/
            r"^(?:flashinfer/|csrc/|include/)",
            exts=(".py", ".h", ".cuh", ".cu", ".cc"),
        ),
        Project(
            "xgrammar",
            "https://github.com/mlc-ai/xgrammar",
            "v{release}",
            r"^[^/]+/",
            r"^(?:python/xgrammar/|cpp/)",
            exts=(".py", ".h", ".cc"),
        ),
        Project(
            "ray",
            "https://github.com/ray-project/ray",
            "ray-{release}",
            r"^",
            r"^ray/(?!serve/|tune/|rllib/|data/|train/|air/|dashboard/client/|_private/runtime_env/agent/thirdparty)",
            "python/",
        ),
        Project("lmcache", "https://github.com/LMCache/LMCache", "v{release}", r"^", r"^lmcache/"),
        Project(
            "aiohttp", "https://github.com/aio-libs/aiohttp", "v{release}", r"^[^/]+/", r"^aiohttp/"
        ),
        Project("httpx", "https://github.com/encode/httpx", "{release}", r"^[^/]+/", r"^httpx/"),
        Project(
            "openai",
            "https://github.com/openai/openai-python",
            "v{release}",
            r"^[^/]+/",
            r"^src/openai/(?!types/)",
        ),
        Project(
            "nvidia-container-toolkit",
            "https://github.com/NVIDIA/nvidia-container-toolkit",
            "v{release}",
            r"^",
            r"^(?:cmd|internal|pkg)/",
            exts=(".go",),
        ),
        Project(
            "libnvidia-container",
            "https://github.com/NVIDIA/libnvidia-container",
            "v{release}",
            r"^",
            r"^src/",
            exts=(".c", ".h"),
        ),
        # Slurm (Debian's slurm-wlm source packages): the daemons, srun/sbatch, SPANK's plugin
        # stack; pyxis (NVIDIA's SPANK plugin for containers, git snapshot)
        Project(
            "slurm",
            "https://github.com/SchedMD/slurm",
            "slurm-{release_dashed}-1",
            r"^[^/]+/",
            r"^src/(?:common|slurmd|srun|sbatch|salloc|api|plugins/(?:task|proctrack|gres|mpi|cgroup|switch))/",
            exts=(".c",),
        ),
        Project(
            "pyxis",
            "https://github.com/NVIDIA/pyxis",
            "v{release}",
            r"^",
            r"^[^/]+\.c$",
            exts=(".c",),
        ),
        # ollama (Go): its CLI, server and GPU discovery
        Project(
            "ollama",
            "https://github.com/ollama/ollama",
            "v{release}",
            r"^",
            r"^(?:api|cmd|server|discover|gpu|llm|envconfig|runner)/",
            exts=(".go",),
        ),
        # KV cache transfer engines of disaggregated serving (C++, glog / their own log macros)
        Project(
            "mooncake",
            "https://github.com/kvcache-ai/Mooncake",
            "v{release}",
            r"^",
            r"^mooncake-(?:transfer-engine|store)/(?:src|include)/",
            exts=(".cpp", ".h"),
        ),
        Project(
            "nixl",
            "https://github.com/ai-dynamo/nixl",
            "v{release}",
            r"^",
            r"^src/",
            exts=(".cpp", ".h"),
        ),
        # GCC's C++ runtime (its terminate handler prints the uncaught exception's type), from
        # Debian's gcc source package (the upstream tarball inside its .orig.tar)
        Project(
            "libstdc++",
            "https://github.com/gcc-mirror/gcc",
            "releases/gcc-{release}",
            r"^[^/]+/",
            r"^libstdc\+\+-v3/libsupc\+\+/",
            exts=(".cc",),
        ),
        # the ASGI server of vLLM's and SGLang's HTTP front ends
        Project(
            "uvicorn", "https://github.com/encode/uvicorn", "{release}", r"^[^/]+/", r"^uvicorn/"
        ),
        # model-loading libraries beside transformers: accelerate (device maps, offloading, the
        # meta-device weight copy), diffusers (its loaders, quantizers and model loading; its
        # pipelines/ and per-model modules are thousands of argument checks, left out for size)
        Project(
            "accelerate",
            "https://github.com/huggingface/accelerate",
            "v{release}",
            r"^[^/]+/",
            r"^src/accelerate/(?!test_utils/)",
        ),
        Project(
            "diffusers",
            "https://github.com/huggingface/diffusers",
            "v{release}",
            r"^[^/]+/",
            r"^src/diffusers/(?:[^/]+\.py$|loaders/|quantizers/|utils/|models/[^/]+\.py$)",
        ),
        # gguf-py (llama.cpp's GGUF reader and writer, published from its gguf-py/ directory)
        Project(
            "gguf",
            "https://github.com/ggml-org/llama.cpp",
            "gguf-v{release}",
            r"^[^/]+/",
            r"^gguf/",
            "gguf-py/",
        ),
        # client-side harnesses: the litellm SDK and proxy (its enterprise/ code, under another
        # licence, is not read) and AutoGen's agent runtime
        Project(
            "litellm",
            "https://github.com/BerriAI/litellm",
            "v{release}",
            r"^",  # a wheel (its sdist needs a build just to be downloaded)
            # its core, its exception mapping, the router and the OpenAI-compatible provider paths
            # (all of its 100-odd providers cost 2 MB; these are what an inference server meets)
            r"^litellm/(?!.*enterprise)(?:[^/]+\.py$|litellm_core_utils/|router_utils/|"
            r"llms/(?:openai|openai_like|vllm|hosted_vllm|custom_httpx|base_llm|ollama)/)",
        ),
        Project(
            "autogen-agentchat",
            "https://github.com/microsoft/autogen",
            "python-v{release}",
            r"^[^/]+/",
            r"^src/autogen_agentchat/",
            "python/packages/autogen-agentchat/",
        ),
        Project(
            "autogen-ext",
            "https://github.com/microsoft/autogen",
            "python-v{release}",
            r"^[^/]+/",
            r"^src/autogen_ext/",
            "python/packages/autogen-ext/",
        ),
        Project(
            "autogen-core",
            "https://github.com/microsoft/autogen",
            "python-v{release}",
            r"^[^/]+/",
            r"^src/autogen_core/",
            "python/packages/autogen-core/",
        ),
        Project(
            "open-gpu-kernel-modules",
            "https://github.com/NVIDIA/open-gpu-kernel-modules",
            "{release}",
            r"^",
            r"^(?:kernel-open/|src/nvidia/src/kernel/gpu/(?:gsp|fifo|mem_mgr|rc|bif|mmu|arch/(?:turing|ampere|hopper|blackwell))|"
            r"src/nvidia/src/kernel/core/|src/nvidia/src/libraries/utils/nvassert\.c$|"
            r"src/nvidia/arch/nvalloc/unix/)",
            exts=(".c", ".h"),
        ),
    )
}

# Snapshots read through `git ls-tree` + `git cat-file` under these directories only (their
# large test data and media blobs are absent from the snapshot, which `git archive` refuses).
GIT_PATHS: dict[str, tuple[str, ...]] = {
    "ollama": ("api", "cmd", "server", "discover", "gpu", "llm", "envconfig", "runner"),
    "mooncake": ("mooncake-transfer-engine", "mooncake-store"),
    "nixl": ("src",),
}

# Git snapshots: project -> (mirror directory name, [(ref, release name)]).
GIT_SOURCES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "nccl": (
        "NVIDIA+nccl",
        [
            (f"v{v}-1", v)
            for v in (
                "2.14.3",
                "2.18.5",
                "2.20.5",
                "2.21.5",
                "2.23.4",
                "2.26.2",
                "2.27.7",
                "2.30.7",
            )
        ],
    ),
    "nvidia-container-toolkit": (
        "NVIDIA+nvidia-container-toolkit",
        [(f"v{v}", v) for v in ("1.14.6", "1.17.8", "1.20.0")],
    ),
    # the pop-os fork packages upstream's v1.12.1 (its history is small enough to fetch)
    "libnvidia-container": ("pop-os+libnvidia-container", [("HEAD", "1.12.1")]),
    "open-gpu-kernel-modules": (
        "NVIDIA+open-gpu-kernel-modules",
        [(v, v) for v in ("550.144.03", "580.95.05", "595.45.04")],
    ),
    "pydantic-core": ("pydantic+pydantic-core", [(f"v{v}", v) for v in ("2.33.2", "2.41.5")]),
    "tokenizers": ("huggingface+tokenizers", [("HEAD", "HEAD")]),
    "pyxis": ("NVIDIA+pyxis", [(f"v{v}", v) for v in ("0.11.0", "0.16.1", "0.20.0", "0.24.0")]),
    "ollama": ("ollama+ollama", [(f"v{v}", v) for v in ("0.1.48", "0.5.13", "0.12.11", "0.32.15")]),
    "mooncake": ("kvcache-ai+Mooncake", [(f"v{v}", v) for v in ("0.3.5", "0.3.12.post1")]),
    "nixl": ("ai-dynamo+nixl", [(f"v{v}", v) for v in ("1.0.0", "1.4.0")]),
    "safetensors": ("huggingface+safetensors", [("HEAD", "HEAD")]),
}

_DIST_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+?)-(?P<version>\d[\w.+]*?)(?:-cp|-py|\.tar\.gz$|-[\w.]+-[\w.]+-[\w.]+\.whl$)"
)
_DIST_PROJECT = {
    "vllm": "vllm",
    "sglang": "sglang",
    "torch": "torch",
    "transformers": "transformers",
    "huggingface_hub": "huggingface_hub",
    "triton": "triton",
    "flashinfer_python": "flashinfer",
    "xgrammar": "xgrammar",
    "ray": "ray",
    "lmcache": "lmcache",
    "aiohttp": "aiohttp",
    "httpx": "httpx",
    "openai": "openai",
    "uvicorn": "uvicorn",
    "accelerate": "accelerate",
    "diffusers": "diffusers",
    "gguf": "gguf",
    "litellm": "litellm",
    "autogen_agentchat": "autogen-agentchat",
    "autogen_ext": "autogen-ext",
    "autogen_core": "autogen-core",
}


def archive_files(path: Path) -> Iterator[tuple[str, bytes]]:
    """(path inside, bytes) of every member of a wheel or sdist, in archive order."""
    if path.suffix == ".whl" or path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if (
                    not info.is_dir()
                    and info.file_size <= MAX_FILE_BYTES
                    and Path(info.filename).suffix in EXTRACTORS
                ):
                    yield info.filename, zf.read(info)
    else:
        with tarfile.open(path) as tf:
            for member in tf:
                if (
                    member.isfile()
                    and member.size <= MAX_FILE_BYTES
                    and Path(member.name).suffix in EXTRACTORS
                ):
                    fh = tf.extractfile(member)
                    if fh is not None:
                        yield member.name, fh.read()


def nested_archive_files(path: Path, inner: str, wanted: str) -> Iterator[tuple[str, bytes]]:
    """The members under `wanted` of the tarball `inner` inside the tarball `path` (Debian's gcc
    .orig.tar holds upstream's tarball), read as a stream: nothing is unpacked to disk."""
    with tarfile.open(path) as outer:
        for member in outer:
            if not (member.isfile() and re.search(inner, member.name)):
                continue
            fh = outer.extractfile(member)
            if fh is None:
                continue
            with tarfile.open(fileobj=fh, mode="r|*") as tf:
                for item in tf:
                    if (
                        item.isfile()
                        and item.size <= MAX_FILE_BYTES
                        and re.search(wanted, item.name)
                        and Path(item.name).suffix in EXTRACTORS
                    ):
                        data = tf.extractfile(item)
                        if data is not None:
                            yield item.name, data.read()


def git_files(git_dir: Path, ref: str) -> Iterator[tuple[str, bytes]]:
    """Every file of one commit of a bare git directory, through `git archive` (nothing checked out)."""
    data = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", "--format=tar", ref],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        for member in tf:
            if (
                member.isfile()
                and member.size <= MAX_FILE_BYTES
                and Path(member.name).suffix in EXTRACTORS
            ):
                fh = tf.extractfile(member)
                if fh is not None:
                    yield member.name, fh.read()


def git_tree_files(git_dir: Path, ref: str, paths: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
    """The files of one commit under `paths`, blob by blob (a blob absent from the snapshot is
    skipped), in tree order."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "-z", "-l", ref, "--", *paths],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8", "replace")
    wanted: list[tuple[str, str]] = []
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, name = entry.split("\t", 1)
        _mode, kind, sha, size = meta.split()
        small = kind == "blob" and size != "-" and int(size) <= MAX_FILE_BYTES
        if small and Path(name).suffix in EXTRACTORS:
            wanted.append((name, sha))
    for name, sha in wanted:
        blob = subprocess.run(
            ["git", f"--git-dir={git_dir}", "cat-file", "blob", sha], capture_output=True
        )
        if blob.returncode == 0:
            yield name, blob.stdout


@dataclass(frozen=True)
class Release:
    project: str
    release: str
    files: Callable[[], Iterator[tuple[str, bytes]]]
    origin: str  # what was read, for the meta table (file name or mirror@ref; no host paths)


def _version_key(text: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\-+]", text.lstrip("v")) if p)


# Debian source packages (`apt-get source --download-only`): the upstream tarball only
_DEB_RE = re.compile(
    r"^(?P<name>[a-z0-9.+-]+?)_(?P<version>[0-9][\w.~]*?)(?:\+dfsg)?\.orig\.tar\.(?:xz|gz)$"
)
_DEB_PROJECT = {
    "pytorch": "torch-cpp",
    "systemd": "systemd",
    "python3.13": "cpython",
    "slurm-wlm": "slurm",
    "gcc-14": "libstdc++",
}
# Debian tarballs that hold the upstream tarball itself (gcc): (inner tarball, paths to read)
_DEB_NESTED = {"libstdc++": (r"^[^/]+/gcc-[0-9.]+-dfsg\.tar\.xz$", r"/libstdc\+\+-v3/libsupc\+\+/")}


def discover(
    pypi: Path | None, git: Path | None, only: set[str] | None, debian: Path | None = None
) -> tuple[list[Release], list[str]]:
    releases: list[Release] = []
    notes: list[str] = []
    if debian is not None and debian.is_dir():
        for path in sorted(debian.iterdir()):
            deb = _DEB_RE.match(path.name)
            project = _DEB_PROJECT.get(deb["name"]) if deb else None
            if deb is None or project is None or (only and project not in only):
                continue
            reader = (
                partial(nested_archive_files, path, *_DEB_NESTED[project])
                if project in _DEB_NESTED
                else partial(archive_files, path)
            )
            releases.append(Release(project, deb["version"], reader, path.name))
    if pypi is not None and pypi.is_dir():
        for path in sorted(pypi.iterdir()):
            found = _DIST_RE.match(path.name)
            if not found:
                continue
            project = _DIST_PROJECT.get(found["name"].lower().replace("-", "_"))
            if project is None or (only and project not in only):
                continue
            version = found["version"].split("+")[0]
            releases.append(Release(project, version, partial(archive_files, path), path.name))
    if git is not None and git.is_dir():
        for project, (mirror, refs) in GIT_SOURCES.items():
            if only and project not in only:
                continue
            git_dir = git / mirror / "repo"
            if not git_dir.is_dir():
                notes.append(f"missing git snapshot {mirror}")
                continue
            for ref, name in refs:
                ok = subprocess.run(
                    [
                        "git",
                        f"--git-dir={git_dir}",
                        "rev-parse",
                        "--verify",
                        "-q",
                        ref + "^{commit}",
                    ],
                    capture_output=True,
                    text=True,
                )
                if ok.returncode != 0:
                    notes.append(f"missing ref {mirror}@{ref}")
                    continue
                commit = ok.stdout.strip()
                release = commit[:12] if name == "HEAD" else name
                reader = (
                    partial(git_tree_files, git_dir, ref, GIT_PATHS[project])
                    if project in GIT_PATHS
                    else partial(git_files, git_dir, ref)
                )
                releases.append(Release(project, release, reader, f"{mirror}@{commit}"))
    releases.sort(key=lambda r: (r.project, _version_key(r.release)))
    return releases, notes


def fixture_releases(root: Path) -> list[Release]:
    """Releases from a directory tree <root>/<project>/<release>/<files> (the test fixtures)."""
    out: list[Release] = []
    for proj_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for rel_dir in sorted(p for p in proj_dir.iterdir() if p.is_dir()):

            def files(d: Path = rel_dir) -> Iterator[tuple[str, bytes]]:
                for f in sorted(d.rglob("*")):
                    if f.is_file() and f.suffix in EXTRACTORS:
                        yield f.relative_to(d).as_posix(), f.read_bytes()

            out.append(
                Release(
                    proj_dir.name, rel_dir.name, files, f"fixture:{proj_dir.name}/{rel_dir.name}"
                )
            )
    out.sort(key=lambda r: (r.project, _version_key(r.release)))
    return out


# -- build -----------------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE project (name TEXT PRIMARY KEY, repo TEXT NOT NULL, tag TEXT NOT NULL,
    repo_prefix TEXT NOT NULL, releases TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE message (id INTEGER PRIMARY KEY, template TEXT NOT NULL, anchor TEXT NOT NULL,
    literal INTEGER NOT NULL);
CREATE TABLE path (id INTEGER PRIMARY KEY, file TEXT NOT NULL);
CREATE TABLE site (message INTEGER NOT NULL, project TEXT NOT NULL, path INTEGER NOT NULL,
    function TEXT NOT NULL, kind TEXT NOT NULL, releases INTEGER NOT NULL, lines TEXT NOT NULL,
    PRIMARY KEY (message, project, path, function, kind)) WITHOUT ROWID;
CREATE TABLE file (project TEXT NOT NULL, file TEXT NOT NULL, releases INTEGER NOT NULL,
    functions BLOB NOT NULL, PRIMARY KEY (project, file)) WITHOUT ROWID;
CREATE INDEX message_anchor ON message (anchor);
"""


def anchor_of(template: str) -> str:
    """The longest whole word of a template's literal text (a word touching a placeholder may be
    longer in the log, so it is never the anchor). Lookup finds candidates by this word."""
    best = ""
    pieces = template.split(WILDCARD)
    for i, piece in enumerate(pieces):
        words = list(re.finditer(r"[A-Za-z0-9_]+", piece))
        for j, word in enumerate(words):
            if i > 0 and j == 0 and word.start() == 0:
                continue
            if i < len(pieces) - 1 and j == len(words) - 1 and word.end() == len(piece):
                continue
            text = word.group()
            if not re.search("[A-Za-z]", text):
                continue
            if len(text) > len(best) or (len(text) == len(best) and text < best):
                best = text
    return best


def literal_length(template: str) -> int:
    return len(template.replace(WILDCARD, ""))


Sites = dict[tuple[str, str, str, str, str], dict[str, int]]
Files = dict[tuple[str, str], set[str]]
Functions = dict[tuple[str, str], dict[str, set[str]]]
_PY_DEF_RE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.M)


def python_functions(source: str) -> set[str]:
    """The names a traceback frame can show for code of this file: every def and class."""
    return set(_PY_DEF_RE.findall(source))


def functions_blob(names: dict[str, set[str]], releases: list[str], file_mask: int) -> bytes:
    """The functions of one file as zlib'd lines `name` (defined in every release that ships the
    file) or `name<TAB>mask` (only in the releases of the mask); sorted, so the bytes are stable."""
    lines = []
    for name in sorted(names):
        mask = _mask(releases, names[name])
        lines.append(name if mask == file_mask else f"{name}\t{mask}")
    return zlib.compress("\n".join(lines).encode(), 9)


def collect(
    releases: list[Release], log: Callable[[str], None]
) -> tuple[Sites, dict[str, list[str]], Files, Functions]:
    """{(template, project, file, function, kind): {release: line}}, {project: [releases]},
    {(project, file): releases} (every source file read: a traceback frame names one) and
    {(project, file): {function: releases}}."""
    sites: Sites = {}
    order: dict[str, list[str]] = {}
    files: Files = {}
    functions: Functions = {}
    for rel in releases:
        project = PROJECTS[rel.project]
        order.setdefault(rel.project, []).append(rel.release)
        count = 0
        macros: dict[str, str] = {}
        if project.macro_files:  # a first pass over the release for its string macros
            for name, data in rel.files():
                if re.search(project.macro_files, re.sub(project.strip, "", name, count=1)):
                    macros.update(string_macros(data.decode("utf-8", "replace")))
        for name, data in rel.files():
            path = re.sub(project.strip, "", name, count=1)
            if not re.search(project.keep, path) or _SKIP.search(path):
                continue
            suffix = Path(path).suffix
            if suffix not in project.exts:
                continue
            text = data.decode("utf-8", "replace")
            for pattern, repl in project.renames:
                path = re.sub(pattern, repl, path, count=1)
            link_path = project.repo_prefix + path
            if suffix == ".py":  # the file table serves traceback frames: Python files only
                files.setdefault((rel.project, link_path), set()).add(rel.release)
                defined = functions.setdefault((rel.project, link_path), {})
                for fname in python_functions(text):
                    defined.setdefault(fname, set()).add(rel.release)
            extract = EXTRACTORS[suffix]
            if extract is c_messages:
                messages = c_messages(text, macros, rel.project)
            elif extract is rust_messages:
                messages = rust_messages(text, project.rust_formats)
            else:
                messages = extract(text)
            for msg in messages:
                key = (msg.template, rel.project, link_path, msg.function, msg.kind)
                lines = sites.setdefault(key, {})
                lines.setdefault(rel.release, msg.line)
                count += 1
        log(f"{rel.project} {rel.release}: {count} messages from {rel.origin}")
    return sites, order, files, functions


def _mask(releases: list[str], present: Iterable[str]) -> int:
    have = set(present)
    return sum(1 << i for i, rel in enumerate(releases) if rel in have)


def write(
    out: Path,
    sites: Sites,
    order: dict[str, list[str]],
    files: Files,
    origins: list[str],
    functions: Functions | None = None,
) -> dict[str, int]:
    """A fresh SQLite file with rows in sorted order: the same inputs give the same bytes."""
    tmp = out.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("PRAGMA journal_mode = OFF")
    conn.executescript(SCHEMA)
    templates = sorted({key[0] for key in sites})
    ids = {t: i + 1 for i, t in enumerate(templates)}
    conn.executemany(
        "INSERT INTO message VALUES (?, ?, ?, ?)",
        ((ids[t], t, anchor_of(t), literal_length(t)) for t in templates),
    )
    paths = {f: i + 1 for i, f in enumerate(sorted({key[2] for key in sites}))}
    conn.executemany("INSERT INTO path VALUES (?, ?)", ((i, f) for f, i in paths.items()))
    rows = []
    for (template, project, file, function, kind), lines in sites.items():
        releases = order[project]
        mask = 0
        line_list = []
        for i, rel in enumerate(releases):
            if rel in lines:
                mask |= 1 << i
                line_list.append(str(lines[rel]))
        rows.append(
            (ids[template], project, paths[file], function, kind, mask, ",".join(line_list))
        )
    rows.sort()
    conn.executemany("INSERT INTO site VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    file_rows = []
    for (p, f), rels in sorted(files.items()):
        mask = _mask(order[p], rels)
        blob = functions_blob((functions or {}).get((p, f), {}), order[p], mask)
        file_rows.append((p, f, mask, blob))
    conn.executemany("INSERT INTO file VALUES (?, ?, ?, ?)", file_rows)
    conn.executemany(
        "INSERT INTO project VALUES (?, ?, ?, ?, ?)",
        sorted(
            (
                name,
                PROJECTS[name].repo,
                PROJECTS[name].tag,
                PROJECTS[name].repo_prefix,
                ",".join(rels),
            )
            for name, rels in order.items()
        ),
    )
    meta = {
        "format": CATALOG_FORMAT,
        "templates": str(len(templates)),
        "sites": str(len(rows)),
        "inputs": "\n".join(sorted(origins)),
    }
    conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    tmp.replace(out)
    return {"templates": len(templates), "sites": len(rows)}


def build(releases: list[Release], out: Path, log: Callable[[str], None] = print) -> dict[str, int]:
    sites, order, files, functions = collect(releases, log)
    return write(out, sites, order, files, [r.origin for r in releases], functions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pypi", type=Path, help="directory of downloaded wheels and sdists")
    parser.add_argument("--git", type=Path, help="directory of git snapshots (<owner>+<name>/repo)")
    parser.add_argument(
        "--debian", type=Path, help="directory of Debian .orig.tar.* source tarballs"
    )
    parser.add_argument("--fixtures", type=Path, help="a <project>/<release>/ tree instead (tests)")
    parser.add_argument("--only", action="append", help="only these projects (repeatable)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--strict", action="store_true", help="a missing source is an error")
    args = parser.parse_args(argv)
    notes: list[str] = []
    if args.fixtures:
        releases = fixture_releases(args.fixtures)
    else:
        releases, notes = discover(
            args.pypi, args.git, set(args.only) if args.only else None, args.debian
        )
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.strict and notes:
        return 1
    if not releases:
        print("no sources found", file=sys.stderr)
        return 1
    stats = build(releases, args.out, lambda s: print(s, file=sys.stderr))
    print(
        f"{args.out}: {stats['templates']} templates, {stats['sites']} sites, {args.out.stat().st_size} bytes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
