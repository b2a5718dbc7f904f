"""Signature families: which node condition a node-layer signature belongs to.

A node-problem-detector condition is one state of a node (`kubectl describe node` shows one line
per condition), so `triage export npd` groups node-layer signatures into a few families, one
condition each. The grouping is computed from the knowledge base's own data, never kept as a list
of signature ids: a node-layer signature belongs to the first family (in the order below) that
has one of its tag groups (one tag, or tags that must all be there). The order puts the hardware
a failure names before the generic "it is an Xid" family, so Xid 74 (tags xid, nvlink) is an
NVLink failure, Xid 79 (xid, pcie) a PCIe one and Xid 48/94 (xid, ecc) memory ones; the Xids that
name no such part (13, 31, 43, 45, 154) form the GPU Xid family.

Node-layer signatures that describe how a workload or its container is set up (a JIT compiler
missing, a systemd sandbox, a small /dev/shm) rather than the health of the node are in no family:
a node condition must not turn on because one job is misconfigured. They are listed by id in
`NOT_NODE_HEALTH`, so that a new node-layer signature has to be classified (tagged for a family,
or listed here) before the tests pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from triage.kb.records import Signature

NODE_LAYER = "node"


@dataclass(frozen=True)
class Family:
    name: str  # the value of `--family`
    condition: str  # the NPD condition type (CamelCase, as Kubernetes condition types are)
    title: str  # what a person reads in docs and the healthy condition's message
    # a node-layer signature belongs here when it has every tag of one of these groups
    tags: tuple[frozenset[str], ...]
    since: str  # the window `triage export npd` gives this family's rule (see docs/fleet.md)


def _any(*tags: str) -> tuple[frozenset[str], ...]:
    """Groups of one tag each: any of these tags is enough."""
    return tuple(frozenset({t}) for t in tags)


# In precedence order: a signature belongs to the first family one of whose tag groups it has.
# Hardware families read the whole boot: the part stays broken until the node is rebooted, so its
# condition must not clear when the kernel line scrolls out of a short window.
FAMILIES: tuple[Family, ...] = (
    Family(
        "nvlink-fabric",
        "GPUNVLinkFabricProblem",
        "NVLink, NVSwitch and Fabric Manager",
        _any("nvlink", "nvswitch", "fabric-manager"),
        "boot",
    ),
    Family(
        "memory-ecc",
        "MemoryECCProblem",
        "GPU and host memory ECC (Xid 48/94, row remapping, machine checks)",
        (*_any("ecc", "row-remapping", "edac"), frozenset({"memory", "hardware"})),
        "boot",
    ),
    Family(
        "pcie",
        "GPUPCIeProblem",
        "PCIe, AER, IOMMU and GPUs lost from the bus",
        _any("pcie", "iommu", "aer"),
        "boot",
    ),
    Family(
        "gpu-xid",
        "GPUXidProblem",
        "other NVIDIA Xid errors",
        _any("xid"),
        "-10min",
    ),
    Family(
        "driver-container",
        "GPUDriverContainerProblem",
        "the NVIDIA driver, NVML and the container runtime's GPU hooks",
        _any("driver", "nvml", "kernel-module", "container-runtime", "device-plugin"),
        "-10min",
    ),
    Family(
        "accelerator-fault",
        "AcceleratorFaultProblem",
        "hangs, resets and memory faults of AMD and Intel GPUs (amdgpu, ROCm, Level Zero)",
        (*_any("amdgpu", "gpu-hang"), frozenset({"xpu", "gpu-reset"})),
        "-10min",
    ),
)

FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)

# Node-layer signatures that are about a workload's set-up, not the node's health (see above).
NOT_NODE_HEALTH: frozenset[str] = frozenset(
    {
        # moved to node by the layer review (docs/audits.md): the host's set-up breaks a
        # workload's transport, download or JIT build; not a condition of the GPU node's health
        "gloo-connect-full-mesh-failed",
        # the ninth session's packs: a transport's memory registration or endpoint set-up (like
        # nccl-ib-verbs-call-failed), a job's container image or helper, a Ray worker's store or
        # session directory, and a clock slowdown (a warning: reported, not a node condition)
        "aws-ofi-nccl-endpoint-setup-failed",
        "aws-ofi-nccl-memory-registration-failed",
        "aws-ofi-nccl-no-eligible-provider",
        "efa-device-command-failed",
        "enroot-helper-command-not-found",
        "enroot-registry-http-error",
        "gpu-clocks-hw-slowdown",
        "libfabric-memory-registration-failed",
        "ray-object-store-full",
        "ray-session-dir-disk-full",
        "hf-download-disk-full",
        "hf-hub-download-timeout",
        "hf-hub-rate-limited",
        "hf-hub-ssl-certificate-verify-failed",
        "jit-ninja-missing",
        "jit-nvcc-not-found",
        "jit-python-h-missing",
        "nccl-ib-completion-error",
        "nccl-ib-verbs-call-failed",
        "nccl-shm-segment-create-failed",
        "ray-node-marked-dead",
        "ray-worker-oom-killed",
        "ray-worker-sigbus-small-dev-shm",
        "vllm-device-type-infer-failed",
        "boot-waits-for-unplugged-network-ports",
        "config-container-no-gpu-request",
        "config-container-shm-default",
        "config-systemd-dynamic-user-home",
        "config-systemd-restrict-address-families",
        "containerd-image-pull-disk-full",
        "cuda-devices-busy-exclusive-mode",
        "cuda-nvrtc-library-not-found",
        "dev-shm-too-small",
        "disk-full-no-space-left",
        "host-memory-exhausted",
        "host-oom-killer",
        "jit-c-compiler-missing",
        "jit-cuda-toolkit-missing",
        "kernel-hung-task-blocked",
        "k8s-insufficient-gpu",
        "kubernetes-container-oomkilled",
        "libcudart-not-found",
        "memcg-oom-kill",
        "memlock-limit-too-low",
        "missing-system-shared-library",
        "nfs-stale-file-handle",
        "nvcc-cuda-headers-not-found",
        "process-thread-limit-reached",
        "read-only-file-system",
        "systemd-restrict-address-families-drops-inet",
        "systemd-sandbox-breaks-jit",
        "systemd-start-limit-hit",
        "too-many-open-files",
        "wheel-filename-rewritten-invalid",
        # the sixth session's packs: set-up of the service, the scheduler, the container, the
        # transport or the workload on a node, not the node's health
        "amdgpu-kfd-asic-not-supported",
        "amdsmi-library-error",
        "cache-dir-permission-denied",
        "disk-quota-exceeded",
        "enroot-user-namespace-denied",
        "gaudi-device-acquire-failed",
        "gpu-reset-refused-device-in-use",
        "gpu-topology-no-direct-path",
        "mig-gpu-instance-insufficient-resources",
        "mooncake-memory-registration-failed",
        "nccl-ibverbs-unavailable-socket-fallback",
        "nccl-socket-loopback-interface",
        "nccl-socket-virtual-interface",
        "nixl-ucx-connection-lost",
        "nvshmem-init-failed",
        "ollama-model-exceeds-system-memory",
        "ollama-no-compatible-gpu-discovered",
        "ray-worker-register-raylet-failed",
        "rccl-p2p-ipc-handle-failed",
        "rocm-hsa-init-out-of-resources",
        "rocm-kfd-open-failed",
        "rocm-no-hip-gpus-available",
        "slurm-gpu-request-unsatisfiable",
        "slurm-gres-config-error",
        "slurm-job-time-limit-reached",
        "slurm-mig-enabled-no-mig-devices",
        "systemd-environment-file-missing",
        "systemd-exec-directory-setup-failed",
        "systemd-exec-spawn-failed",
        "systemd-namespace-setup-failed",
        "systemd-stdout-setup-failed",
        "systemd-unit-user-missing",
        "systemd-working-directory-missing",
        "tpu-device-open-failed",
        # the seventh session's packs: a VM without CUDA memory pools, Docker Desktop's VM-sized
        # /dev/shm, kubelet's own pressure eviction (Kubernetes reports that condition itself)
        "cuda-memory-pool-unsupported",
        "docker-desktop-linux-dev-shm-below-vm-ram",
        "docker-cdi-feature-not-enabled",
        "k8s-pod-evicted-node-pressure",
        # pack p28-r16o: a KV-transfer engine's RDMA set-up (like nccl-ib-verbs-call-failed)
        "mooncake-rdma-transport-no-usable-rnic",
        # the thirteenth session's pack p26-nh: a compose client too old for GPU reservations,
        # and CUDA_VISIBLE_DEVICES naming more GPUs than CUDA exposes (MIG mode, wrong indices):
        # a job's set-up, not the node's health
        "docker-compose-too-old-for-gpu-reservations",
        "cuda-visible-devices-exceeds-gpu-count",
        # a job's container image built for another CPU architecture than the node
        "container-image-wrong-cpu-architecture",
        # ollama's installer run in a container without lspci / lshw (the GPU itself is fine)
        "ollama-installer-gpu-detection-tools-missing",
        # pack p28-r16o: a device plugin scheduled where its device does not exist, an NPU
        # container's device access (a job's set-up, not the node's health)
        "aws-efa-device-plugin-no-efa-devices",
        "ascend-dcmi-init-failed",
    }
)


class UnknownFamily(ValueError):
    pass


def family(name: str) -> Family:
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise UnknownFamily(f"unknown family {name!r} (one of: {', '.join(FAMILY_NAMES)})")


def family_of(signature: Signature) -> str | None:
    """The family of a signature: None for other layers and for signatures in no family."""
    if signature.layer != NODE_LAYER:
        return None
    tags = set(signature.tags)
    for fam in FAMILIES:
        if any(group <= tags for group in fam.tags):
            return fam.name
    return None


def family_map(signatures: Iterable[Signature]) -> dict[str, str | None]:
    """Every node-layer signature id and its family (None: in no family)."""
    return {s.id: family_of(s) for s in signatures if s.layer == NODE_LAYER}
