"""Produce real NCCL / torch.distributed failure logs on one GPU (for corpus cases, origin: reproduced).

Run on the GPU machine:  OUT=/some/dir python3 corpus/engine/repro/repro_nccl.py
Each scenario runs in fresh subprocesses; the combined stdout+stderr goes to $OUT/<scenario>.log.
Scenarios: healthy (1-rank NCCL init with NCCL_DEBUG=INFO), watchdog (a collective queued behind a
GPU kernel that never finishes within timeout=), duplicate-gpu (two ranks on one device),
no-socket-if (NCCL_SOCKET_IFNAME=nonexistent), port-in-use (torchrun on a port already bound).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def worker(scenario: str, rank: int, world: int, port: int) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(0)
    timeout = datetime.timedelta(seconds=8 if scenario == "watchdog" else 60)
    dist.init_process_group("nccl", rank=rank, world_size=world, timeout=timeout,
                            device_id=torch.device("cuda", 0) if scenario == "healthy" else None)
    x = torch.ones(1 << 20, device="cuda")
    if scenario == "watchdog":
        dist.all_reduce(x)  # first collective completes
        torch.cuda.synchronize()
        print(f"rank {rank}: first all_reduce ok", flush=True)
        torch.cuda._sleep(1 << 40)  # a kernel that outlives the timeout, ahead of the next collective
        dist.all_reduce(x)
        time.sleep(40)
        print("not reached", flush=True)
        return
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print(f"rank {rank}: all_reduce result {x[0].item()}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def run(name: str, cmds: list[list[str]], env_extra: dict[str, str], timeout: int, out: str) -> None:
    env = dict(os.environ)
    env.update({"PYTHONUNBUFFERED": "1"})
    env.update(env_extra)
    path = os.path.join(out, f"{name}.log")
    with open(path, "wb") as fh:
        procs = [subprocess.Popen(c, stdout=fh, stderr=subprocess.STDOUT, env=env) for c in cmds]
        deadline = time.time() + timeout
        for p in procs:
            try:
                p.wait(max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        fh.flush()
    print(f"== {name}: rc={[p.returncode for p in procs]}", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    out = os.environ.get("OUT", "/tmp/out")
    os.makedirs(out, exist_ok=True)
    py = sys.executable
    dbg = {"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
           "NVSHMEM_DISABLE_NVLS": "1"}
    w = lambda sc, r, n, port: [py, HERE, "worker", sc, str(r), str(n), str(port)]  # noqa: E731
    run("nccl-healthy-1rank-init", [w("healthy", 0, 1, 29511)], dbg, 60, out)
    run("nccl-watchdog-timeout", [w("watchdog", 0, 1, 29512)], dbg, 75, out)
    run("nccl-duplicate-gpu", [w("dup", 0, 2, 29513), w("dup", 1, 2, 29513)], dbg, 60, out)
    run("nccl-no-socket-interface", [w("noif", 0, 1, 29514)],
        dict(dbg, NCCL_SOCKET_IFNAME="nonexistent0"), 60, out)
    # TCPStore port already in use: hold the port, then start torchrun's rendezvous on it.
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    s.bind(("0.0.0.0", 29515))
    s.listen(1)
    run("dist-tcpstore-port-in-use",
        [[py, "-m", "torch.distributed.run", "--nproc-per-node=1", "--master-port=29515",
          HERE, "worker", "healthy", "0", "1", "29515"]], dbg, 60, out)
    s.close()
    subprocess.run(["nvidia-smi", "topo", "-m"], stdout=open(os.path.join(out, "topo.txt"), "wb"),
                   stderr=subprocess.STDOUT)


if __name__ == "__main__":
    main()
