"""The salient-line fallback (issue 16, point 4): a failure line in any format triage reads is at
least located (`unrecognized`, exit 1) when no signature knows it. Run with an empty knowledge
base, so only the fallback speaks; every shape has a real failure line and a real near miss from
the healthy corpus that must stay silent. Then the eval subset of point 7."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import run_text
from triage.api import Engine, KnowledgeBase
from triage.evaluate import evaluate
from triage.models import Report

CORPUS = ROOT / "corpus"
R13 = ROOT / "audits" / "round-13"
R15 = ROOT / "audits" / "round-15"
R16 = ROOT / "audits" / "round-16"
NATIVE = ROOT / "tests" / "fixtures" / "native"
HEALTHY = CORPUS / "healthy"


def _line(path: Path, contains: str) -> str:
    return next(line for line in path.read_text().splitlines() if contains in line)


@pytest.fixture(scope="module")
def bare() -> Engine:
    return Engine(KnowledgeBase([]))


FAILURES = {
    # kubectl get pods (vllm-project/aibrix#1054)
    "crashloop": "deepseek-r1-distill-llama-8b-5cc594fd46-hg5rw   0/1     CrashLoopBackOff   5 "
    "(2m30s ago)   13m",
    # kubectl describe pod events (tarantool/tarantool-operator#88)
    "backoff": "    Warning  BackOff           4m25s (x157 over 38m)  kubelet, minikube  "
    "Back-off restarting failed container",
    # docker (corpus/node: nvidia-container-cli cases)
    "daemon": "docker: Error response from daemon: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process",
    # kernel: filesystem (longhorn/longhorn#2775) and block I/O (sonic-net/sonic-buildimage#23146)
    "ext4": "Jul 14 10:26:29 immortal kernel: [699646.295473] EXT4-fs error (device sdf): "
    "ext4_find_entry:1455: inode #2: comm minio: reading directory lblock 0",
    "io": "2025 Jul  2 06:56:57.749644 sonic_testbed ERR kernel: [  993.622973] I/O error, dev "
    "loop1, sector 1314944 op 0x1:(WRITE) flags 0x0 phys_seg 2 prio class 2",
    # NVRM failure (corpus/node/gpu-fallen-off-bus-multiline-no-xid.log)
    "nvrm": _line(
        ROOT / "corpus" / "node" / "gpu-fallen-off-bus-multiline-no-xid.log", "probe routine"
    ),
    # systemd (corpus/node/gap-systemd-start-limit-bitcoind.log)
    "systemd": _line(
        ROOT / "corpus" / "node" / "gap-systemd-start-limit-bitcoind.log", "Failed to start"
    ),
    # klog/glog error record (corpus/engine/vllm-ascend-mooncake-connector-...)
    "glog": _line(
        ROOT / "corpus" / "engine" / "vllm-ascend-mooncake-connector-connect-segment-failed.log",
        "E1210 03:24:54.778028",
    ),
    # Python logging error record (corpus/harness/taskingai-startup-...)
    "pylog": _line(
        ROOT / "corpus" / "harness" / "taskingai-startup-cannot-connect-inference-service.log",
        " - ERROR - ",
    ),
    # TensorRT's [E] tag (corpus/engine/cuda-stream-capture-tensorrt-trtexec.log)
    "tag-e": _line(
        ROOT / "corpus" / "engine" / "cuda-stream-capture-tensorrt-trtexec.log", "] [E] "
    ),
    # a command-line tool's own error line (corpus/engine: ollama's CLI)
    "cli-error": _line(
        ROOT / "corpus" / "engine" / "ollama-external-ssd-timed-out-waiting-runner.log", "Error: "
    ),
    # a bracketed error tag (corpus/engine: the Ascend runtime's [ERROR] record)
    "tag-error": _line(
        ROOT / "corpus" / "engine" / "gap-vllm-reasoning-parser-not-found-headless.log", "[ERROR] "
    ),
    # SGLang's worker reporting its exception on one line, the traceback cut after it
    # (corpus/engine/sglang-0.5.15-qwen3.6-35b-a3b-fp8-decode-scheduler-exception.log)
    "hit-exception": _line(
        ROOT
        / "corpus"
        / "engine"
        / "sglang-0.5.15-qwen3.6-35b-a3b-fp8-decode-scheduler-exception.log",
        "hit an exception",
    ),
    # a C++ assert() as glibc prints it, Triton's layout pass on a V100 (audits/round-11)
    "c-assert": _line(
        ROOT
        / "audits"
        / "round-11"
        / "engine"
        / "vllm-prefix-caching-v100-triton-getcvtorder-mma-layout-assert.log",
        "Assertion `",
    ),
    # systemctl's own failure line (audits/round-11: nvidia-fabricmanager on a GeForce host)
    "systemctl-job": _line(
        ROOT
        / "audits"
        / "round-11"
        / "node"
        / "rocky8-fabricmanager-start-failed-geforce-no-nvswitch.log",
        "Job for ",
    ),
    # a failure stated in words, found silent under an empty knowledge base (docs/audits.md,
    # ninth session): a call that failed, "Failed to ...: reason", a tool's "error loading",
    # a CUDA runtime error code, an HTTP error a client reports
    "call-failed": _line(CORPUS / "node" / "snapshot-ucx-ibv-create-cq-memlock-64k.log", "failed"),
    "camel-failed": _line(
        CORPUS / "engine" / "ik-llamacpp-compute-buffer-280gb-device-0.log", "cudaMalloc failed"
    ),
    "snake-failed": _line(
        CORPUS / "node" / "libfabric-app-fi-mr-reg-failed-enomem.log", "fi_mr_reg failed"
    ),
    "failed-to": _line(
        CORPUS / "node" / "nvml-insufficient-permissions-podman-cdi-rootless.log",
        "Failed to initialize NVML",
    ),
    "error-loading": _line(
        CORPUS / "engine" / "llamacpp-rocm-qwen36-35b-missing-tensor-ssm-conv1d.log",
        "error loading model",
    ),
    "cuda-error-name": _line(
        CORPUS / "node" / "windows-bandwidthtest-cuda-error-35.log", "cudaErrorInsufficientDriver"
    ),
    "http-error": _line(
        CORPUS / "model" / "tinker-llama32-converting-from-sentencepiece-and-tiktoken-failed.log",
        "Error code: 400",
    ),
    # Kubernetes scheduling and probes, a tool's ERROR:/fatal: prefix, compilers, DKMS, pydantic
    "k8s-nodes": _line(
        CORPUS / "node" / "aws-virtual-gpu-pending-insufficient-vgpu.log", "nodes are available"
    ),
    "k8s-probe": _line(
        CORPUS / "harness" / "snapshot-k8s-events-liveness-probe-404-restarts.log",
        "Liveness probe failed",
    ),
    "tool-error": _line(CORPUS / "node" / "secure-boot-facer-unavailable-key-dmesg.log", "insmod:"),
    "tool-fatal": _line(
        CORPUS / "node" / "slurmd-mig-enabled-no-mig-devices-autodetect.log", "slurmd: fatal"
    ),
    "cc-fatal": _line(
        CORPUS / "node" / "jit-python-h-missing-sglang-cuda-graph.log", "fatal error: Python.h"
    ),
    "dkms": _line(
        CORPUS / "node" / "dkms-nvidia-current-367-debian-sid-build-error.log", "Error! Bad"
    ),
    "pydantic-value": _line(
        CORPUS / "engine" / "vllm-tp-heads-not-divisible-dsv4-tp3.log", "Value error, "
    ),
    # C++ terminate's what() line, a CUDA device-side assert, amdgpu, PyTorch's glog, UCX
    "what": _line(
        CORPUS / "engine" / "cuda-illegal-memory-access-sglang-nccl-watchdog.log", "what():  [PG"
    ),
    "device-assert": _line(
        CORPUS / "engine" / "cuda-device-side-assert-llava-index-kernel.log", "Assertion `index"
    ),
    "amdgpu": _line(
        CORPUS / "node" / "amdgpu-ring-gfx-timeout-reset-failed-rx6800.log", "ring gfx_0.0.0"
    ),
    "torch-glog": _line(
        CORPUS / "engine" / "nccl-llamafactory-watchdog-allreduce-every-rank.log",
        "Watchdog caught collective operation timeout",
    ),
    "ucx-error": _line(
        CORPUS / "node" / "ucx-ibv-exp-reg-mr-invalid-argument-rocm-buffer.log", "UCX  ERROR"
    ),
    # more shapes found silent under an empty knowledge base (the same audit)
    "slurm-cancelled": _line(
        CORPUS / "node" / "slurm-job-step-cancelled-time-limit-srun.log", "DUE TO TIME LIMIT"
    ),
    "installer-error": _line(
        CORPUS / "node" / "nvidia-installer-unable-to-load-modeset-dgx-spark.log",
        "ERROR: Unable to load the kernel module",
    ),
    "http-reason": _line(
        CORPUS / "engine" / "vllm-glm-ocr-image-exceeds-encoder-cache-400.log",
        "Error 400 Bad Request",
    ),
    "aer-fatal": _line(
        CORPUS / "node" / "aer-uncorrected-fatal-gpu-root-port.log",
        "AER: Multiple Uncorrected (Fatal) error received",
    ),
    "mpirun-signal": _line(
        CORPUS / "node" / "trtllm-llama3-70b-tp8-mpirun-rank-exited-signal-9.log",
        "exited on signal 9",
    ),
    "tool-named-error": _line(
        CORPUS / "engine" / "llamacpp-rocm-rocblas-use-hipblaslt-gfx1151-library-missing.log",
        "rocblaslt error: Cannot read",
    ),
    "zap-json": _line(
        CORPUS / "harness" / "kgateway-no-endpoints-found-for-inferencepool.log", '"level":"error"'
    ),
    "state-dict-size": _line(
        CORPUS / "model" / "mcan-vqa-small-size-mismatch-embedding-weight-vocab.log",
        "size mismatch for embedding.weight",
    ),
    "hsa-status": _line(
        CORPUS / "node" / "rocminfo-hsa-out-of-resources-after-model-reloads.log",
        "HSA_STATUS_ERROR",
    ),
    "rust-unwrap": _line(
        CORPUS / "node" / "sglang-router-actix-worker-too-many-open-files.log", "Result::unwrap()"
    ),
    "sglang-watchdog": _line(
        CORPUS / "engine" / "sglang-watchdog-timeout-soft-thinking-qwq32b.log",
        "Watchdog timeout (self",
    ),
    "glog-no-date": _line(
        CORPUS / "engine" / "nccl-vllm-0.5-watchdog-allreduce-worker-died.log",
        "[E ProcessGroupNCCL.cpp:563]",
    ),
    "ptxas": _line(
        CORPUS / "engine" / "vllm-m40-build-paged-attention-ptxas-f16-requires-sm53.log",
        "error   : Feature",
    ),
    "kubelet-warning": _line(
        CORPUS / "node" / "gap-k8s-no-runtime-nvidia-configured.log", "FailedCreatePodSandBox"
    ),
    "unable-to": _line(
        CORPUS / "node" / "nvidia-smi-gpu-is-lost-reboot-to-recover.log",
        "Unable to determine the device handle",
    ),
    "nvrm-api-mismatch": _line(
        CORPUS / "node" / "nvrm-api-mismatch-client-name-pid-595.log", "NVRM: API mismatch"
    ),
    # a third pass over the same audit's silent cases
    "selinux-avc": _line(
        CORPUS / "node" / "selinux-avc-denied-module-load-gpu-operator-rhel8.log", "avc:  denied"
    ),
    "apparmor": _line(
        CORPUS / "node" / "apparmor-denied-nvidia-smi-snmpd-profile-synology.log",
        'apparmor="DENIED"',
    ),
    "mpi-error": _line(
        CORPUS / "engine" / "trtllm-pip-mpi4py-mpi-init-thread-null-communicator-slurm.log",
        "*** An error occurred in MPI_Init_thread",
    ),
    "ptxas-fatal": _line(
        CORPUS / "engine" / "jit-h200-repro-ptxas-unknown-sm.log", "ptxas fatal   :"
    ),
    "cuda-returned": _line(
        CORPUS / "node" / "cuda-samples-devicequery-returned-999-unknown-error.log",
        "cudaGetDeviceCount returned 999",
    ),
    "cuda-driver-api-error": _line(
        CORPUS / "node" / "nvbandwidth-multinode-single-node-h200-cumemcreate-not-permitted.log",
        "CUDA_ERROR_NOT_PERMITTED",
    ),
    "ggml-cuda-error": _line(
        CORPUS / "engine" / "llamacpp-b1233-cuda-error-2-ggml-cuda-out-of-memory.log",
        "CUDA error 2 at",
    ),
    "rocm-fault": _line(
        CORPUS / "engine" / "rocm-memory-access-fault-comfyui-gfx1100.log",
        "Memory access fault by GPU node-1",
    ),
    "sxid": _line(
        CORPUS / "node" / "nvswitch-sxid-22013-minion-dlreq-tdx-guest.log",
        "SXid (PCI:0000:04:00.0)",
    ),
    "version-magic": _line(
        CORPUS / "node" / "nvidia-version-magic-mismatch-fedora31-upgrade.log",
        "version magic '5.4.18",
    ),
    "json-code": _line(
        CORPUS / "harness" / "llama-server-context-size-has-been-exceeded-500.log",
        '"code":500,"message"',
    ),
    "openai-error-body": _line(
        CORPUS / "model" / "vllm-openai-client-400-default-chat-template.log",
        "'object': 'error', 'message'",
    ),
    "loguru": _line(
        CORPUS / "harness" / "aihawk-ollama-https-url-wrong-version-number.log", "| ERROR    |"
    ),
    "error-tag-lower": _line(
        CORPUS / "engine" / "runpod-voxtral-mini-please-install-vllm-audio.log",
        "[error]Please install",
    ),
    # round 13's silent shapes (scored blind before this change): an assert macro of a C
    # library, a Go daemon's lower-case permission error after its time, a tool's bad flag, a
    # hosted endpoint that failed to start, rich's error record, a loader's dropped format
    "ggml-assert": _line(
        R13 / "engine" / "llamacpp-server-mamba-ggml-assert-cell-has-seq-id.log", "GGML_ASSERT"
    ),
    "go-error-denied": _line(
        R13
        / "node"
        / "nvidia-docker-plugin-as-normal-user-bind-plugin-socket-permission-denied.log",
        "bind: permission denied",
    ),
    "invalid-argument": _line(
        R13 / "engine" / "llama-box-chat-template-inline-jinja-invalid-argument.log",
        "Invalid argument: --chat-template",
    ),
    "failed-to-start": _line(
        R13 / "engine" / "tgi-inference-endpoint-shard-failed-clear-cache-exit-1.log",
        "Endpoint failed to start",
    ),
    "rich-error": _line(
        R13 / "harness" / "distilabel-magpie-step-load-failed-404-hf-inference-api-status.log",
        "Failed to load step",
    ),
    "no-longer-supported": _line(
        R13 / "model" / "llamacpp-llava-mmproj-ggufv1-no-longer-supported.log",
        "no longer supported",
    ),
    "fail-to-access": _line(
        R13 / "harness" / "ragflow-add-vllm-magistral-fail-to-access-nonetype-strip.log",
        "Fail to access model",
    ),
    # silent shapes of the empty-knowledge-base development set (corpus failures the fallback
    # missed): a mixed-case library's named error, a bare CUDA runtime error, Ray's autoscaler and
    # Slurm's error records, errno words after a path, a component's initialization failure,
    # "Could not ..." at line start, a build step's FAILED, DRM's error record, Ray's loggers
    "mixed-case-library-error": _line(
        CORPUS / "engine" / "rocblas-tensile-library-dat-missing-gfx1103-hip-sdk-windows.log",
        "rocBLAS error: Cannot read",
    ),
    "cuda-error-bare": _line(
        CORPUS / "node" / "cudadrv-jl-k80-context-create-uncorrectable-ecc-214.log",
        "CUDA error: uncorrectable ECC",
    ),
    "paren-prefix-error": _line(
        CORPUS / "harness" / "vllm-ray-vllm-host-ip-public-address-no-node-types.log",
        "(autoscaler +13s) Error: No available node types",
    ),
    "errno-after-path": _line(CORPUS / "node" / "dev-shm-full-go-judge.log", "no space left"),
    "go-lstat-missing": _line(
        CORPUS / "node" / "nvidia-docker-lstat-dev-nvidia-uvm-after-kernel-update.log",
        "lstat /dev/nvidia-uvm",
    ),
    "initialization-failed": _line(
        CORPUS / "node" / "nvshmem-ibgda-no-transport-nv-peer-mem-deepep.log",
        "nvshmem initialization failed",
    ),
    "could-not-unload": _line(
        CORPUS / "node" / "gpu-driver-container-modules-in-use-host-driver-preinstalled.log",
        "Could not unload NVIDIA driver kernel modules",
    ),
    "build-step-failed": _line(
        CORPUS / "node" / "dkms-nvidia-367-void-failed-to-build.log", "... FAILED!"
    ),
    "drm-error": _line(
        CORPUS / "node" / "amdgpu-ring-gfx-timeout-freebsd-780m-llamacpp-vulkan.log",
        "ring gfx_0.0.0 timeout",
    ),
    "ray-critical": _line(
        CORPUS / "node" / "ray-raylet-node-marked-dead-fatal-in-docker.log", " C 74 74] (raylet)"
    ),
    "ray-python-error": _line(
        CORPUS / "node" / "ray-raylet-terminated-dashboard-agent-grpc-unavailable.log",
        "ERROR agent.py:217 --",
    ),
    # a permission check (NVIDIA/nccl, shm_open)
    "denied": "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : "
    "Permission denied",
    # shapes from blind round 15's silent cases (measured before they were added), and Go
    # panics: a Go panic's first line (ROCm/container-toolkit#59) and a signal death
    # (NVIDIA/nvidia-container-toolkit#1398), both in tests/fixtures/native/
    "go-panic": _line(NATIVE / "amd-ctk-59-nil-pointer.log", "panic: "),
    "go-signal": _line(NATIVE / "toolkit-1398-sigabrt-cgo.log", "SIGABRT"),
    "exec-format": _line(
        R15 / "node" / "ollama-helm-eks-exec-format-error-image-arch.log", "exec format error"
    ),
    "econnrefused": _line(
        R15 / "harness" / "continue-llamacpp-provider-completion-econnrefused-8080.log",
        "ECONNREFUSED",
    ),
    "unable-to-configure": _line(
        R15 / "node" / "dockerd-nvidia-runtime-registered-flag-and-daemon-json.log",
        "unable to configure",
    ),
    "fail-to-call": _line(
        R15 / "engine" / "aiter-mi300a-fmha-v3-hipmodulelaunchkernel-invalid-handle.log",
        "fail to call",
    ),
    "libcxxabi-terminate": _line(
        R15 / "engine" / "mlx-swift-gemma-quantized-embedding-matmul-shape.log", "libc++abi"
    ),
    # shapes from blind round 16's silent cases (measured before they were added): LLVM's fatal
    # error (Triton), nginx's upstream errno, a 504 page, an SDK's JSON error event, a Go log's
    # "Could not register", an NPU driver module's "initialize failed"
    "llvm-error": _line(
        R16 / "engine" / "vllm-v0-mooncake-pd-prefill-llvm-error-parent-layout-slice.log",
        "LLVM ERROR",
    ),
    "nginx-upstream": _line(
        R16 / "harness" / "nginx-default-proxy-read-timeout-llm-agent-stream.log",
        "upstream timed out",
    ),
    "gateway-time-out": _line(
        R16 / "harness" / "anythingllm-api-504-haproxy-in-front.log", "504 Gateway Time-out"
    ),
    "json-error-event": _line(
        R16 / "harness" / "copilot-sdk-openrouter-provider-no-endpoints-found.log",
        '"type":"error"',
    ),
    "go-log-could-not": _line(
        R16 / "node" / "k8s-device-plugin-register-unimplemented-kubelet-no-device-plugins.log",
        "Could not register",
    ),
    "initialize-failed": _line(
        R16 / "node" / "vllm-ascend-container-npu-smi-dcmi-init-failed-8005.log",
        "initialize failed",
    ),
    # Rust's tracing at ERROR (sgl-project/sglang#11310, the router's own test output)
    "rust-tracing-error": "2025-10-07 23:31:33 ERROR sglang_router_rs::core::worker: "
    "src/core/worker.rs:517: Failed to connect gRPC client for worker grpc://localhost:20000: "
    "transport error",
}

NEAR_MISSES = {
    # systemctl's pointer to the unit's status, the line after its failure line
    "systemctl-see": _line(
        ROOT
        / "audits"
        / "round-11"
        / "node"
        / "rocky8-fabricmanager-start-failed-geforce-no-nvswitch.log",
        "See ",
    ),
    "running-pod": _line(HEALTHY / "kubectl-describe-pod-two-containers-running.log", "Running"),
    "restart-0": _line(HEALTHY / "kubectl-describe-pod-two-containers-running.log", "Restart"),
    "ext4-mounted": _line(HEALTHY / "dmesg-boot-ext4-nvme-root-mounted.log", "EXT4-fs"),
    "nvrm-loading": _line(HEALTHY / "dmesg-nvrm-331-load-uvm-quoted.log", "NVRM: loading"),
    "systemd-started": _line(HEALTHY / "dmesg-boot-systemd-started-units-ext4.log", "Started "),
    "logrus-warning": _line(HEALTHY / "dockerd-containerd-plugins-btrfs-warning.log", "warning"),
    "logrus-info": _line(HEALTHY / "gpu-operator-container-toolkit-install-level-info.log", "info"),
    "pip-error": _line(HEALTHY / "pip-build-deps-resolver-error-line-installed.log", "ERROR: pip"),
    # a corrected AER record says "Bus Error:" and is not a tool's error line
    "aer-corrected": _line(
        ROOT / "corpus" / "node" / "aer-corrected-data-link-layer-journal.log", "Bus Error"
    ),
    "glog-warning": _line(
        HEALTHY / "torch-destroy-process-group-warning-timestamped.log", "ProcessGroupNCCL"
    ),
    "request-error": _line(
        HEALTHY / "vllm-0.8-startup-then-404-model-not-found.log", "serving_chat.py"
    ),
    # the shapes of the "failed" class at INFO/WARNING level, and a word (not a call) that failed
    "module-verification": _line(
        HEALTHY / "dmesg-nvidia-525-unsigned-module-taints-loaded.log", "verification failed"
    ),
    "nccl-info-failed": _line(
        HEALTHY / "nccl-2.28-debug-init-net-env-1rank-h200.log", "NCCL INFO Failed to initialize"
    ),
    "access-log-404": _line(HEALTHY / "vllm-0.8-startup-then-404-model-not-found.log", "404"),
    # a check that could not be made is not a failure (a GPU operator driver container)
    "unable-to-check": _line(
        HEALTHY / "gpu-operator-driver-ctr-modules-built-secure-boot-unknown.log", "Unable to"
    ),
    "logrus-warn-failed": _line(
        HEALTHY / "dockerd-containerd-plugins-btrfs-warning.log", "failed to load plugin"
    ),
    # constructed to test the gates of the round-13 shapes: a warning that something failed to
    # start (a start-up that retries), a quoted assert macro that did not fail, "Fail to" inside a
    # word, a permission word at INFO level, a CLI's warning sign before 'Failed to'
    "warning-failed-to-start": "WARNING 05-06 10:00:00 [launcher.py:12] Worker failed to start, "
    "retrying in 5 s",
    "assert-quoted": "llama.cpp: build has GGML_ASSERT(x) checks enabled",
    "fail-to-in-word": "INFO: Waitfail to restart is disabled",
    "info-permission": "INFO 05-06 10:00:00 [cache.py:40] checked /root/.cache: permission denied "
    "is handled by falling back to /tmp",
    # the healthy twins of the development set's shapes: Ray's INFO records, DRM's info record,
    # a DKMS build that completed; a warning that an optional component failed to initialize
    # and an INFO-level errno phrase (constructed, to test the level gates)
    "ray-python-info": _line(
        HEALTHY / "vllm-0.10-ray-tp2-two-nodes-startup.log", "INFO worker.py:1747 --"
    ),
    "drm-info": _line(
        HEALTHY / "dmesg-nvidia-390-taints-kernel-modeset.log", "[drm] Initialized nvidia-drm"
    ),
    "dkms-completed": _line(
        HEALTHY / "dkms-nvidia-vgpu-build-install-completed-pve.log", "DKMS: build completed"
    ),
    "warning-initialization-failed": "WARNING 05-06 10:00:00 [utils.py:12] flashinfer "
    "initialization failed, falling back to the triton backend",
    "info-errno": "INFO 05-06 10:00:00 [weight_utils.py:40] write /dev/shm/probe: no space left "
    "on device, using the disk cache",
    "warning-sign-failed-to": "\u26a0\ufe0f Failed to load optional plugin foo: not installed",
    # the healthy twins of round 15's shapes: Rust's tracing at INFO (a router start-up), and,
    # constructed to test the gates, "panic:" inside a sentence and an INFO-level ECONNREFUSED
    "rust-tracing-info": _line(
        HEALTHY / "sglang-router-openai-backend-startup-info.log", "Starting worker"
    ),
    # round 16's twins, constructed to test the gates: LLVM ERROR with no message after it, a
    # JSON event of type "info", a Go log line that could register
    "llvm-error-no-colon": "INFO 05-06 10:00:00 [compile.py:10] LLVM ERROR handler installed",
    "json-info-event": '{"type":"info","message":"404 handler registered","code":"OK"}',
    "go-log-registered": "2020/02/09 00:20:15 Registered device plugin with Kubelet",
    "panic-in-words": "INFO 05-06 10:00:00 [engine.py:1] no need to panic: the retry is queued",
    "info-econnrefused": "INFO 05-06 10:00:00 [client.py:40] connect ECONNREFUSED 127.0.0.1:8000, "
    "the server is not up yet; retrying",
}


def _unexplained(report: Report) -> list[int]:
    """The salient lines no curated signature explains: still unrecognized, or located by the
    message catalog (docs/catalog.md), which turns such a line into a `located` hypothesis."""
    located = [e.line for h in report.hypotheses if h.basis == "located" for e in h.evidence]
    return sorted([u.line for u in report.unrecognized] + located)


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_shape_is_located(bare: Engine, tmp_path: Path, name: str) -> None:
    report = run_text(bare, FAILURES[name] + "\n", tmp_path)
    assert _unexplained(report) == [1], name
    assert report.failed


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_miss_stays_silent(bare: Engine, tmp_path: Path, name: str) -> None:
    report = run_text(bare, NEAR_MISSES[name] + "\n", tmp_path)
    assert not _unexplained(report), (name, report.unrecognized)
    assert not report.failed


def test_traceback_cut_before_its_exception_is_reported(bare: Engine, tmp_path: Path) -> None:
    # an SGLang scheduler traceback (corpus/engine) cut after three frames: the frames are all
    # there is, so the traceback's first line is reported (not silent); the near miss, the same
    # traceback with an exception line, is reported by that line instead
    log = (
        ROOT
        / "corpus"
        / "engine"
        / "sglang-0.5.15-qwen3.6-35b-a3b-fp8-decode-scheduler-exception.log"
    )
    lines = log.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "Traceback (most recent call last)" in line)
    frames = [line for line in lines[start:] if line.lstrip().startswith(("File ", "Traceback"))]
    cut = run_text(
        bare, "\n".join(["Traceback (most recent call last):", *frames[1:4]]) + "\n", tmp_path
    )
    assert _unexplained(cut) == [1] and cut.failed
    whole = run_text(
        bare,
        "\n".join(["Traceback (most recent call last):", *frames[1:4], "KeyError: 'x'"]) + "\n",
        tmp_path,
    )
    assert _unexplained(whole) == [5]


def test_logger_block_body_and_recovered_startup_are_not_failures(
    bare: Engine, tmp_path: Path
) -> None:
    # vLLM logs a retried safetensors lookup at ERROR level, then starts: recovered, not a failure
    log = HEALTHY / "vllm-gpt-oss-120b-ray-tp4-ansi-safetensors-retry.log"
    assert not _unexplained(bare.run([str(log)]))
    # the same record with nothing after it (the start-up never became ready) is located
    head = _line(log, "Error retrieving safetensors")
    assert _unexplained(run_text(bare, head + "\n", tmp_path)) == [1]


def test_healthy_corpus_is_silent_with_the_shipped_kb(engine: Engine) -> None:
    for log in sorted(HEALTHY.glob("*.log")):
        report = engine.run([str(log)])
        assert not report.failed, (log.name, report.unrecognized[:2])


# --- 7. an audit round's subset --------------------------------------------------------------


def test_eval_reports_a_tagged_subset(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    for layer, name, extra in (
        ("engine", "a", "round: 9\n"),
        ("engine", "b", "tags: [round-9, nccl]\n"),
        ("engine", "c", ""),
    ):
        (root / layer).mkdir(parents=True, exist_ok=True)
        (root / layer / f"{name}.log").write_bytes(
            (ROOT / "examples" / "vllm-kv-cache-oom.log").read_bytes()
        )
        (root / layer / f"{name}.expected.yaml").write_text(
            "source: https://example.invalid/x\norigin: real\n"
            + extra
            + "expect:\n  top: kv-cache-no-memory\n  line: 10\n"
        )
    assert len(evaluate(root, tag="round-9").cases) == 2
    assert len(evaluate(root, tag="9").cases) == 1  # `round: 9` also answers to its bare number
    assert len(evaluate(root, tag="nccl").cases) == 1
    assert len(evaluate(root, glob="engine/c.log").cases) == 1
    everything = evaluate(root)
    assert len(everything.cases) == 3
    assert all(c.top1 and c.layer_ok for c in everything.cases)


# A traceback pasted from its middle (kubeai#224 as the issue shows it, audits/round-11): frames
# and source lines, no head, no exception line.
HEADLESS = (
    ROOT
    / "audits"
    / "round-11"
    / "engine"
    / "kubeai-vllm-chunked-prefill-plus-prefix-caching-engine-step-trace-cut.log"
)


def test_a_traceback_without_its_head_is_reported_by_its_first_frame(bare: Engine) -> None:
    report = bare.run([str(HEADLESS)])
    assert _reported_lines(report) == [1]
    assert report.failed


def test_frames_after_a_real_head_add_no_second_head(bare: Engine, tmp_path: Path) -> None:
    """Near miss: the same frames below their 'Traceback (most recent call last):' line are that
    traceback's own; the head (line 1) is what is reported, once."""
    text = "Traceback (most recent call last):\n" + HEADLESS.read_text()
    report = run_text(bare, text, tmp_path)
    assert _reported_lines(report) == [1]


def _reported_lines(report: Report) -> list[int]:
    """The lines reported as failures with no signature: located by the catalog, or not."""
    located = [e.line for h in report.hypotheses if h.basis == "located" for e in h.evidence]
    return sorted(located + [u.line for u in report.unrecognized])
