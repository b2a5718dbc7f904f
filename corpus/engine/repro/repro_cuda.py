"""Trigger real PyTorch / CUDA / Triton failures, each in its own subprocess, and save their output.

Usage: python corpus/engine/repro/repro_cuda.py OUTDIR
Each case writes OUTDIR/<name>.log (stdout and stderr of a fresh interpreter).
Run on NVIDIA H200 / torch 2.11.0+cu130 / Triton 3.6.0 with the first version (cases passed with -c):
the Triton cases (illegal access, misaligned address, shared memory, compilation error) then failed
before launching and were not saved; this version runs each case from a file and was not re-run. Cases that need a
second GPU are skipped on one-GPU machines. Nothing here is a test: the point is the real text.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CASES: dict[str, str] = {}

CASES["cuda-oom-alloc"] = """
import torch
free, total = torch.cuda.mem_get_info()
keep = torch.empty(int(free * 0.6), dtype=torch.uint8, device="cuda")
x = torch.empty(int(free * 0.6), dtype=torch.uint8, device="cuda")
"""

CASES["cuda-oom-fragmented"] = """
import torch
# many small blocks, free every other one, then ask for one block bigger than any hole
free, total = torch.cuda.mem_get_info()
chunk = 512 * 1024 * 1024
blocks = []
try:
    while True:
        blocks.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
for i in range(0, len(blocks), 2):
    blocks[i] = None
print("reserved", torch.cuda.memory_reserved() / 2**30, "allocated", torch.cuda.memory_allocated() / 2**30, flush=True)
y = torch.empty(4 * chunk, dtype=torch.uint8, device="cuda")
"""

CASES["cuda-oom-graph-capture"] = """
import torch
free, total = torch.cuda.mem_get_info()
hog = torch.empty(int(free - 2 * 2**30), dtype=torch.uint8, device="cuda")
x = torch.randn(4096, 4096, device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x @ x
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    outs = [x @ x for _ in range(64)]
"""

CASES["cuda-illegal-memory-access-triton"] = """
import torch, triton, triton.language as tl

@triton.jit
def bad_store(ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64) + (1 << 40)
    tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32))

@triton.jit
def other_kernel(ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.load(ptr + offs) + 1)

x = torch.zeros(1024, device="cuda")
bad_store[(1,)](x, 1024, BLOCK=128)
# launch a second, not yet loaded kernel without synchronising: its module load meets the sticky error
other_kernel[(1,)](x, BLOCK=128)
torch.cuda.synchronize()
"""

CASES["cuda-illegal-memory-access-sync"] = """
import torch, triton, triton.language as tl

@triton.jit
def bad_load(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64) - (1 << 38)
    tl.store(dst + tl.arange(0, BLOCK), tl.load(src + offs))

x = torch.zeros(1024, device="cuda")
y = torch.empty(1024, device="cuda")
bad_load[(1,)](x, y, BLOCK=128)
print(y.sum().item())
"""

CASES["cuda-misaligned-address"] = """
import torch, triton, triton.language as tl

@triton.jit
def misaligned(ptr, out):
    p = (ptr + 1).to(tl.pointer_type(tl.int64))
    tl.store(out, tl.load(p))

x = torch.zeros(64, dtype=torch.int8, device="cuda")
out = torch.zeros(1, dtype=torch.int64, device="cuda")
misaligned[(1,)](x, out)
torch.cuda.synchronize()
"""

CASES["cuda-device-side-assert"] = """
import torch
emb = torch.nn.Embedding(1000, 64).cuda()
ids = torch.tensor([[1, 2, 1500]], device="cuda")
out = emb(ids)
print(out.sum().item())
"""

CASES["cuda-device-side-assert-index"] = """
import torch
x = torch.randn(16, device="cuda")
idx = torch.tensor([3, 99], device="cuda")
print(x[idx].cpu())
"""

CASES["cuda-forked-subprocess"] = """
import multiprocessing as mp
import torch

def child():
    torch.zeros(1, device="cuda")

if __name__ == "__main__":
    torch.zeros(1, device="cuda")
    ctx = mp.get_context("fork")
    p = ctx.Process(target=child)
    p.start()
    p.join()
    print("child exit code", p.exitcode)
"""

CASES["cuda-stream-capture-not-permitted"] = """
import torch
x = torch.randn(1024, device="cuda")
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    x.sum()
torch.cuda.synchronize()
with torch.cuda.graph(g):
    y = x * 2
    if y.sum().item() > 0:
        y = y + 1
"""

CASES["cuda-different-devices"] = """
import torch
a = torch.randn(8, 8, device="cuda")
b = torch.randn(8, 8)
print(torch.mm(a, b))
"""

CASES["cuda-different-devices-2gpu"] = """
import torch, sys
if torch.cuda.device_count() < 2:
    print("SKIP: one GPU"); sys.exit(0)
a = torch.randn(8, 8, device="cuda:0")
b = torch.randn(8, 8, device="cuda:1")
print(a @ b)
"""

CASES["cuda-invalid-device-ordinal"] = """
import torch
n = torch.cuda.device_count()
print("device_count", n, flush=True)
torch.zeros(1, device=f"cuda:{n + 3}")
"""

CASES["cuda-cublas-alloc-failed"] = """
import torch
# take every byte the caching allocator can get, then run the first matmul (cuBLAS handle creation)
hogs = []
for size in (2**30, 2**26, 2**22, 2**20, 2**16):
    while True:
        try:
            hogs.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break
free, total = torch.cuda.mem_get_info()
print("free bytes before first matmul", free, flush=True)
x = hogs[0][: 64 * 64 * 4].view(torch.float32).view(64, 64)
print((x @ x).sum())
"""

CASES["triton-out-of-shared-memory"] = """
import torch, triton, triton.language as tl

@triton.jit
def big_tile(a, b, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, 4):
        x = tl.load(a + rm[:, None] * BK + rk[None, :])
        y = tl.load(b + rk[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)

BM = BN = BK = 512
a = torch.randn(BM, BK, device="cuda", dtype=torch.float16)
b = torch.randn(BK, BN, device="cuda", dtype=torch.float16)
c = torch.empty(BM, BN, device="cuda", dtype=torch.float32)
big_tile[(1,)](a, b, c, BM=BM, BN=BN, BK=BK, num_stages=4)
torch.cuda.synchronize()
"""

CASES["triton-compilation-error"] = """
import torch, triton, triton.language as tl

@triton.jit
def bad(ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.load(ptr + offs) + 1)

x = torch.zeros(1000, device="cuda")
bad[(1,)](x, BLOCK=100)
"""

CASES["triton-ptxas-unsupported-arch"] = """
import os, subprocess, tempfile, triton
from pathlib import Path
base = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
print("ptxas", base, base.exists(), flush=True)
ptx = ".version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k() { ret; }\\n"
with tempfile.TemporaryDirectory() as d:
    p = Path(d) / "k.ptx"
    p.write_text(ptx)
    r = subprocess.run([str(base), "-lineinfo", "-v", "--gpu-name=sm_130", str(p), "-o", str(p) + ".o"],
                       capture_output=True, text=True)
    print(r.stdout, r.stderr, "rc", r.returncode, flush=True)
"""

CASES["torch-dlpack-requires-grad"] = """
import torch
w = torch.nn.Parameter(torch.ones(16, device="cuda"))
cap = torch.utils.dlpack.to_dlpack(w)
"""

CASES["torch-dlpack-requires-grad-protocol"] = """
import torch
w = torch.nn.Parameter(torch.ones(16, device="cuda"))
cap = w.__dlpack__()
"""

CASES["inductor-backend-compiler-failed"] = """
import torch

def broken_backend(gm, example_inputs):
    raise RuntimeError("backend refused the graph")

@torch.compile(backend=broken_backend)
def f(x):
    return torch.sin(x) + 1

f(torch.randn(8, device="cuda"))
"""

CASES["inductor-no-cxx-compiler"] = """
import os, torch
os.environ["CXX"] = "/nonexistent/g++"
os.environ["CC"] = "/nonexistent/gcc"

@torch.compile
def f(x):
    return torch.sin(x) * 2 + x

print(f(torch.randn(64)))
"""

CASES["inductor-cuda-no-cc"] = """
import os, torch
os.environ["CC"] = "/nonexistent/gcc"
os.environ["CXX"] = "/nonexistent/g++"
os.environ["TRITON_CACHE_DIR"] = "/tmp/empty-triton-cache-xyz"

@torch.compile
def f(x):
    return torch.cos(x) * 3 + x

print(f(torch.randn(64, device="cuda")).sum())
"""

CASES["jit-cpp-extension-no-cuda-home"] = """
import os, shutil
os.environ.pop("CUDA_HOME", None); os.environ.pop("CUDA_PATH", None)
os.environ["PATH"] = "/usr/bin:/bin"
print("nvcc on PATH:", shutil.which("nvcc"), flush=True)
import torch
from torch.utils.cpp_extension import load_inline
src = "__global__ void k(float* x) { x[threadIdx.x] += 1; }\\nvoid run(torch::Tensor x) { k<<<1, 32>>>(x.data_ptr<float>()); }"
m = load_inline(name="repro_ext", cpp_sources="void run(torch::Tensor x);", cuda_sources=src,
                functions=["run"], verbose=True, build_directory=None)
"""

CASES["jit-nvcc-unsupported-arch"] = """
import os, shutil, torch
os.environ["TORCH_CUDA_ARCH_LIST"] = "13.0"
from torch.utils.cpp_extension import load_inline, CUDA_HOME
print("CUDA_HOME", CUDA_HOME, shutil.which("nvcc"), flush=True)
src = "__global__ void k(float* x) { x[threadIdx.x] += 1; }\\nvoid run(torch::Tensor x) { k<<<1, 32>>>(x.data_ptr<float>()); }"
m = load_inline(name="repro_ext_arch", cpp_sources="void run(torch::Tensor x);", cuda_sources=src,
                functions=["run"], verbose=True)
"""


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    only = set(sys.argv[2:])
    for name, code in CASES.items():
        if only and name not in only:
            continue
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # Triton's @jit needs its source in a real file (python -c fails with "@jit functions
        # should be defined in a Python file"), so every case runs from a temporary script.
        script = os.path.join(out, f"_{name}.py")
        with open(script, "w") as fh:
            fh.write(textwrap.dedent(code))
        try:
            r = subprocess.run([sys.executable, script], capture_output=True,
                               text=True, timeout=120, env=env)
            text = r.stdout + r.stderr + f"\n[exit code {r.returncode}]\n"
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
            text += "\n[timed out after 120 s]\n"
        with open(os.path.join(out, f"{name}.log"), "w") as fh:
            fh.write(text)
        print(f"== {name}: {text.strip().splitlines()[-2] if len(text.strip().splitlines()) > 1 else text.strip()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
