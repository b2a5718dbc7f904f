"""Produce real torch.distributed / c10d / gloo / NCCL rendezvous failure logs (origin: reproduced).

Run on the GPU machine:  OUT=/some/dir python3 corpus/engine/repro/repro_dist.py
Each scenario runs in fresh subprocesses on 127.0.0.1; the combined stdout+stderr of every
process of a scenario goes to logs/<scenario>.log, and the folder is packed into $OUT/dist-logs.tgz
(the device tool returns at most 8 files). NVLink multicast stays off (NCCL_NVLS_ENABLE=0).

Scenarios (the failure each one provokes, and how):
  store-refused         rank 1 of 2 points at a port nothing listens on (20 s timeout)
  store-unresolvable    MASTER_ADDR is a name that does not resolve (.invalid)
  store-server-wait     rank 0 of 2 hosts the store; rank 1 is never started (15 s timeout)
  store-key-wait        a TCPStore client waits for a key nobody writes (store.wait, 5 s timeout)
  rank-out-of-range     rank 2 with world_size 2 (a launcher computing ranks wrongly)
  master-addr-unset     env:// with MASTER_ADDR unset
  elastic-join-timeout  torchrun --nnodes=2 (c10d rendezvous) with only one node started
  elastic-no-store      torchrun --nnodes=2 at a c10d endpoint that does not answer (10.255.255.1)
  gloo-no-iface         gloo process group with GLOO_SOCKET_IFNAME=nonexistent0
  gloo-peer-exit        2 gloo ranks; rank 1 exits (os._exit) before the second all_reduce
  nccl-net-ib-missing   NCCL_NET=IB on a host without InfiniBand
  nccl-comm-id-refused  NCCL_COMM_ID naming an address that is not on this host (1-rank NCCL group)
  healthy-gloo-2rank    2 gloo ranks under torchrun, TORCH_DISTRIBUTED_DEBUG=DETAIL, LOGLEVEL=INFO
  healthy-elastic-c10d  torchrun --rdzv-backend=c10d, 2 local workers on gloo, LOGLEVEL=INFO
  healthy-nccl-debug    1 NCCL rank with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV, all_reduce
  store-host-exit       a TCPStore server process exits while its client keeps calling store.get
  world-size-mismatch   gloo rank 0 says world_size=2, rank 1 says world_size=3 (one init address)
  env-rank-unset        env:// with MASTER_ADDR/MASTER_PORT set and RANK unset
  torchrun-static-no-master  torchrun --nnodes=2 --node-rank=1 (static), node 0 never started
"""
from __future__ import annotations

import datetime
import os
import subprocess
import sys
import tarfile
import time

HERE = os.path.abspath(__file__)
SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1",
        "PYTHONUNBUFFERED": "1"}


def worker(scenario: str, rank: int, world: int, port: int) -> None:
    import torch  # type: ignore[import-not-found]  # present on the GPU machine only
    import torch.distributed as dist  # type: ignore[import-not-found]

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    if scenario == "store-key-wait":
        store = dist.TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=5))
        store.set("present", "1")
        store.wait(["rank1_ready"])
        return
    if scenario == "store-host-exit":
        if rank == 0:
            limit = datetime.timedelta(seconds=20)
            server = dist.TCPStore("127.0.0.1", port, 2, True, timeout=limit)
            server.set("ready", "1")
            time.sleep(3)
            os._exit(5)  # the store host dies; its client is still using it
        client = dist.TCPStore("127.0.0.1", port, 2, False, timeout=datetime.timedelta(seconds=20))
        client.wait(["ready"])
        for i in range(10):
            client.set(f"k{i}", "v")
            print(f"rank 1: get k{i} -> {client.get(f'k{i}')!r}", flush=True)
            time.sleep(1)
        return
    if scenario == "env-rank-unset":
        os.environ.pop("RANK", None)
        dist.init_process_group("gloo", init_method="env://", world_size=1)
        return
    if scenario == "master-addr-unset":
        os.environ.pop("MASTER_ADDR", None)
        dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
        return
    backend = "nccl" if scenario.startswith("nccl") else "gloo"
    timeout = datetime.timedelta(seconds=20 if scenario != "store-server-wait" else 15)
    if scenario in ("healthy-gloo-2rank", "healthy-elastic-c10d"):
        dist.init_process_group("gloo")
    else:
        if backend == "nccl":
            torch.cuda.set_device(0)
        dist.init_process_group(backend, init_method=f"tcp://{os.environ['MASTER_ADDR']}:{port}",
                                rank=rank, world_size=world, timeout=timeout)
    dev = "cuda" if backend == "nccl" else "cpu"
    x = torch.ones(1 << 16, device=dev)
    dist.all_reduce(x)
    print(f"rank {dist.get_rank()}: all_reduce result {x[0].item()}", flush=True)
    if scenario == "gloo-peer-exit":
        if rank == 1:
            os._exit(3)
        time.sleep(1)
        dist.all_reduce(x)
    dist.barrier()
    dist.destroy_process_group()


def run(name: str, cmds: list[list[str]], env_extra: dict[str, str], timeout: int, out: str,
        drop: tuple[str, ...] = ()) -> None:
    env = dict(os.environ)
    env.update(SAFE)
    env.update(env_extra)
    for k in drop:
        env.pop(k, None)
    path = os.path.join(out, f"{name}.log")
    t0 = time.time()
    with open(path, "wb") as fh:
        procs = []
        for c in cmds:
            procs.append(subprocess.Popen(c, stdout=fh, stderr=subprocess.STDOUT, env=env))
            time.sleep(0.5)
        deadline = time.time() + timeout
        for p in procs:
            try:
                p.wait(max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    print(f"== {name}: rc={[p.returncode for p in procs]} {time.time() - t0:.0f}s", flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    out = os.environ.get("OUT", "/tmp/out")
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    only = set(sys.argv[1:])
    py = sys.executable

    def w(sc: str, r: int, n: int, port: int) -> list[str]:
        """The command line of one worker process of scenario `sc`."""
        return [py, HERE, "worker", sc, str(r), str(n), str(port)]

    trun = [py, "-m", "torch.distributed.run"]
    scen = [
        ("store-refused", [w("store-refused", 1, 2, 29601)], {}, 60),
        ("store-unresolvable", [w("store-unresolvable", 1, 2, 29602)],
         {"MASTER_ADDR": "vllm-head.example.invalid"}, 60),
        ("store-server-wait", [w("store-server-wait", 0, 2, 29603)], {}, 60),
        ("store-key-wait", [w("store-key-wait", 0, 1, 29604)], {}, 40),
        ("rank-out-of-range", [w("rank-out-of-range", 2, 2, 29605)], {}, 40),
        ("master-addr-unset", [w("master-addr-unset", 0, 1, 29606)], {}, 40),
        ("elastic-join-timeout",
         [[*trun, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
           "--rdzv-endpoint=127.0.0.1:29607", "--rdzv-id=job7", "--rdzv-conf=join_timeout=20",
           HERE, "worker", "healthy-gloo-2rank", "0", "0", "29607"]], {"LOGLEVEL": "INFO"}, 90),
        ("elastic-no-store",
         [[*trun, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
           "--rdzv-endpoint=10.255.255.1:29608", "--rdzv-id=job8",
           "--rdzv-conf=join_timeout=20,read_timeout=20",
           HERE, "worker", "healthy-gloo-2rank", "0", "0", "29608"]],
         {"LOGLEVEL": "INFO"}, 90),
        ("gloo-no-iface", [w("gloo-no-iface", 0, 1, 29609)],
         {"GLOO_SOCKET_IFNAME": "nonexistent0"}, 40),
        ("gloo-peer-exit",
         [w("gloo-peer-exit", 0, 2, 29610), w("gloo-peer-exit", 1, 2, 29610)], {}, 60),
        ("nccl-net-ib-missing", [w("nccl-net-ib", 0, 1, 29611)],
         {"NCCL_DEBUG": "INFO", "NCCL_NET": "IB"}, 60),
        ("nccl-comm-id-refused", [w("nccl-comm-id", 0, 1, 29612)],
         {"NCCL_DEBUG": "INFO", "NCCL_COMM_ID": "10.255.255.1:29699"}, 60),
        ("healthy-gloo-2rank",
         [[*trun, "--nproc-per-node=2", "--master-port=29613", HERE, "worker", "healthy-gloo-2rank",
           "0", "0", "29613"]], {"LOGLEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, 60),
        ("healthy-elastic-c10d",
         [[*trun, "--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d",
           "--rdzv-endpoint=127.0.0.1:29614", "--rdzv-id=job14",
           HERE, "worker", "healthy-elastic-c10d", "0", "0", "29614"]], {"LOGLEVEL": "INFO"}, 60),
        ("healthy-nccl-debug", [w("nccl-healthy", 0, 1, 29615)],
         {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}, 60),
        ("store-host-exit", [w("store-host-exit", 0, 2, 29616), w("store-host-exit", 1, 2, 29616)],
         {}, 60),
        ("world-size-mismatch",
         [w("world-size-mismatch", 0, 2, 29617), w("world-size-mismatch", 1, 3, 29617)], {}, 60),
        ("env-rank-unset", [w("env-rank-unset", 0, 1, 29618)],
         {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29618"}, 40),
        ("torchrun-static-no-master",
         [[*trun, "--nnodes=2", "--node-rank=1", "--nproc-per-node=1", "--master-addr=127.0.0.1",
           "--master-port=29619", "--rdzv-conf=timeout=20", HERE, "worker", "healthy-gloo-2rank",
           "0", "0", "29619"]], {"LOGLEVEL": "INFO"}, 70),
    ]
    for name, cmds, env, tmo in scen:
        if only and name not in only:
            continue
        drop = ("MASTER_ADDR",) if name == "master-addr-unset" else ()
        run(name, cmds, env, tmo, logs, drop=drop)
    with open(os.path.join(logs, "versions.txt"), "w") as fh:
        import torch
        nccl = torch.cuda.nccl.version()
        fh.write(f"torch {torch.__version__} cuda {torch.version.cuda} nccl {nccl}\n")
    with tarfile.open(os.path.join(out, "dist-logs.tgz"), "w:gz") as tf:
        tf.add(logs, arcname="logs")


if __name__ == "__main__":
    main()
