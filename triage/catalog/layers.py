"""The layer of a catalogued message: an ordered table from project and path to layer.

docs/catalog.md prints this table with the reasoning beside each row (a test keeps the two equal).
The first row whose project matches and whose path pattern is found in `file::function` wins
(a pattern naming a function, `::load_state_dict`, picks one function of a file).
"""

from __future__ import annotations

import re

# (project, path pattern, layer, why)
LAYER_RULES: tuple[tuple[str, str, str, str], ...] = (
    (
        "nccl",
        r"^src/(?:transport|misc/(?:socket|ibvwrap|ibvsymbols|ipcsocket|shmutils)|proxy|bootstrap"
        r"|net|plugin/net|graph|mnnvl|os/)",
        "node",
        "transports, sockets, InfiniBand, topology, shared memory: the network and the machine",
    ),
    ("nccl", r"", "engine", "collective set-up and launch: how the engine uses NCCL"),
    (
        "nvidia-container-toolkit",
        r"",
        "node",
        "the container runtime hook: the host's GPU plumbing",
    ),
    ("libnvidia-container", r"", "node", "driver and device mounts into containers: the host"),
    ("open-gpu-kernel-modules", r"", "node", "the kernel driver (NVRM): the GPU and the host"),
    (
        "torch",
        r"^torch/csrc/distributed/c10d/(?:socket|TCPStore|Store|FileStore)",
        "node",
        "store sockets: reachability between hosts",
    ),
    (
        "torch",
        r"^torch/distributed/rendezvous\.py::_get_env_or_raise",
        "harness",
        "the launcher did not set MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE",
    ),
    (
        "torch",
        r"^torch/nn/modules/module\.py::Module\.load_state_dict",
        "model",
        "a state dict that does not fit the module: the checkpoint's keys and shapes",
    ),
    (
        "torch",
        r"^torch/distributed/(?:elastic|run\.py|launch)",
        "harness",
        "torchrun and its rendezvous: how the job was launched (addresses, ports, node count)",
    ),
    ("torch", r"", "engine", "tensor, CUDA and collective checks inside the engine's process"),
    (
        "torch-cpp",
        r"^torch/csrc/distributed/c10d/(?:socket|TCPStore|Store|FileStore)",
        "node",
        "rendezvous and store sockets: reachability between hosts",
    ),
    (
        "torch-cpp",
        r"^c10/cuda/CUDAFunctions\.cpp",
        "node",
        "counting and selecting CUDA devices: the driver and the devices the process can see",
    ),
    (
        "torch-cpp",
        r"",
        "engine",
        "c10d, ProcessGroupNCCL, the CUDA allocator, ATen's checks: inside the engine's process",
    ),
    ("systemd", r"", "node", "the service manager and the network: the host"),
    (
        "pydantic-core",
        r"",
        "engine",
        "config and argument validation (vLLM's configs are pydantic): what the engine was given",
    ),
    (
        "cpython",
        r"",
        "engine",
        "the Python runtime's own message: a fault of the code that ran (most often the "
        "engine's; its traceback says whose)",
    ),
    ("transformers", r"", "model", "config, tokenizer and weight reading of the checkpoint"),
    (
        "huggingface_hub",
        r"",
        "model",
        "fetching the checkpoint from the Hub (access, revision, files)",
    ),
    ("tokenizers", r"", "model", "the checkpoint's tokenizer files"),
    ("safetensors", r"", "model", "the checkpoint's weight files"),
    (
        "vllm",
        r"^vllm/model_executor/models/utils\.py::_merge_multimodal_embeddings"
        r"|^vllm/config/model\.py::ModelConfig\.verify_with_parallel_config",
        "engine",
        "the engine's own checks under model code: multimodal embedding merge, parallel sizes",
    ),
    (
        "vllm",
        r"^vllm/v1/engine/input_processor\.py::InputProcessor\._validate_prompt_len",
        "harness",
        "a prompt longer than the served context: what the client sent",
    ),
    (
        "vllm",
        r"::VllmConfig\._get_quantization_config",
        "model",
        "the checkpoint's quantization config against this engine and GPU",
    ),
    (
        "vllm",
        r"^vllm/(?:transformers_utils|tokenizers?)/|^vllm/model_executor/model_loader/|^vllm/model_executor/models/|^vllm/model_executor/layers/quantization/|^vllm/config/model\.py",
        "model",
        "checks about the checkpoint: config, tokenizer, weights, quantization, architecture",
    ),
    (
        "vllm",
        r"^vllm/benchmarks/|^vllm/entrypoints/cli/benchmark",
        "harness",
        "vllm bench: the load generator",
    ),
    (
        "vllm",
        r"^vllm/entrypoints/openai/(?:serving|protocol)|^vllm/entrypoints/(?:chat_utils|utils)\.py",
        "harness",
        "request validation: what the client sent",
    ),
    ("vllm", r"", "engine", "argument parsing, scheduler, workers, kernels: the engine itself"),
    (
        "sglang",
        r"^(?:python/)?sglang/srt/(?:model_loader|models|configs|hf_transformers_utils|layers/quantization)",
        "model",
        "checks about the checkpoint: config, tokenizer, weights, quantization, architecture",
    ),
    ("sglang", r"^(?:python/)?sglang/(?:bench|test)", "harness", "SGLang's benchmark clients"),
    (
        "sglang",
        r"^(?:python/)?sglang/srt/(?:entrypoints/openai|openai_api)",
        "harness",
        "request validation: what the client sent",
    ),
    ("sglang", r"", "engine", "argument parsing, scheduler, workers, kernels: the engine itself"),
    ("triton", r"", "engine", "kernel compilation and launch"),
    ("flashinfer", r"", "engine", "attention and sampling kernels"),
    ("xgrammar", r"", "engine", "structured-output grammar compilation"),
    ("lmcache", r"", "engine", "KV cache offloading and transfer"),
    (
        "ray",
        r"^(?:python/)?ray/(?:autoscaler|_private/(?:node|services|resource_spec))",
        "node",
        "cluster membership and node resources",
    ),
    (
        "ray",
        r"^(?:python/)?ray/_private/utils\.py::check_version_info",
        "harness",
        "Ray or Python versions that differ between the driver and the cluster: how it was set up",
    ),
    ("ray", r"", "engine", "the distributed executor the engine runs on"),
    ("aiohttp", r"", "harness", "HTTP client and server library of benchmark clients and proxies"),
    ("httpx", r"", "harness", "HTTP client of benchmark and SDK clients"),
    ("openai", r"", "harness", "the OpenAI SDK: the client side of a request"),
    ("uvicorn", r"", "engine", "the ASGI server of the engine's HTTP front end"),
    (
        "accelerate",
        r"^src/accelerate/(?:utils/(?:modeling|offload|bnb)\.py|big_modeling\.py)",
        "model",
        "placing the checkpoint's weights on devices: shapes, dtypes, device maps, offload",
    ),
    (
        "accelerate",
        r"^src/accelerate/commands/",
        "harness",
        "accelerate launch: how the job was launched",
    ),
    (
        "accelerate",
        r"",
        "engine",
        "the distributed and mixed-precision runtime the program runs on",
    ),
    (
        "diffusers",
        r"^src/diffusers/(?:loaders/|quantizers/|models/model_loading_utils|models/modeling_utils|configuration_utils)",
        "model",
        "loading and quantizing the checkpoint: config, weights, shapes",
    ),
    ("diffusers", r"", "engine", "the diffusion models' runtime and its utilities"),
    ("gguf", r"", "model", "reading and writing GGUF checkpoint files"),
    ("litellm", r"", "harness", "the LiteLLM SDK and proxy: the client side of a request"),
    (
        "autogen-agentchat",
        r"",
        "harness",
        "AutoGen's agents: the application sending the requests",
    ),
    (
        "autogen-ext",
        r"",
        "harness",
        "AutoGen's model clients and tools: the application sending the requests",
    ),
    (
        "autogen-core",
        r"",
        "harness",
        "AutoGen's agent runtime: the application sending the requests",
    ),
    (
        "libstdc++",
        r"",
        "engine",
        "the C++ runtime ending a process on an uncaught exception: the process that threw it",
    ),
    ("slurm", r"", "node", "the cluster's job launcher: steps, SPANK plugins, node daemons"),
    ("pyxis", r"", "node", "Slurm's container plugin (enroot images, namespaces): the host"),
    (
        "ollama",
        r"^server/images\.go::PullModel",
        "harness",
        "pulling a model by the name the caller gave (a tag or manifest that does not exist)",
    ),
    ("ollama", r"", "engine", "ollama's CLI, server and GPU discovery: the engine itself"),
    (
        "go",
        r"",
        "engine",
        "the Go runtime's own panic: a fault of the program that ran (ollama's, when it is the "
        "engine)",
    ),
    (
        "llama.cpp",
        r"::ggml_cuda_init$|::ggml_backend_cuda_init$",
        "node",
        "finding the GPU back end's devices: the driver and the devices the process can see",
    ),
    ("llama.cpp", r"", "engine", "ggml's kernels and llama.cpp's server: the engine itself"),
    (
        "tensorrt-llm",
        r"",
        "engine",
        "TensorRT-LLM's runtime, KV cache manager and kernels: the engine itself",
    ),
    ("go-nvml", r"", "node", "NVML's Go bindings loading the driver's library: the host's driver"),
    (
        "amd-container-toolkit",
        r"",
        "node",
        "AMD's container toolkit (CDI specs for the GPUs): the host's GPU plumbing",
    ),
    (
        "k8s-device-plugin",
        r"",
        "node",
        "the Kubernetes device plugin that advertises the GPUs: the node's GPU plumbing",
    ),
    (
        "mooncake",
        r"transport|rdma|tcp",
        "node",
        "RDMA and TCP transports of KV cache transfer: the network",
    ),
    ("mooncake", r"", "engine", "KV cache transfer between prefill and decode instances"),
    (
        "nixl",
        r"plugins/(?:ucx|libfabric|gds|posix)",
        "node",
        "UCX, fabric and storage back ends: the network and the host",
    ),
    ("nixl", r"", "engine", "KV cache transfer between prefill and decode instances"),
)

_COMPILED = tuple((p, re.compile(rx), layer, why) for p, rx, layer, why in LAYER_RULES)


def layer_of(project: str, path: str, function: str = "") -> tuple[str, str]:
    """(layer, why) for a message printed in this project's file (and function); engine when no
    row matches."""
    subject = f"{path}::{function}"
    for name, pattern, layer, why in _COMPILED:
        if name == project and pattern.search(subject):
            return layer, why
    return "engine", "no row of the layer table names this project"


# Programs that drive an engine in-process (RL trainers, fine-tuning and evaluation suites,
# application frameworks): a frame of theirs in a traceback is the caller of the engine code below.
CALLER_PACKAGES: tuple[str, ...] = (
    "openrlhf",
    "verl",
    "trl",
    "llamafactory",
    "swift",
    "nemo_rl",
    "nemo_aligner",
    "areal",
    "roll",
    "lm_eval",
    "lmms_eval",
    "opencompass",
    "evalplus",
    "langchain_community",
    "langchain_openai",
    "llama_index",
    "litellm",
    "dspy",
    "outlines",
)
_CALLER_FRAME = re.compile(
    r"(?:^|[/\\])(?P<pkg>" + "|".join(CALLER_PACKAGES) + r")[/\\][\w/\\.-]*\.py$"
)
# What a call that does not fit the callee raises: an attribute, argument or name the caller was
# written against and this release of the engine does not have.
API_CONTRACT_ERRORS = frozenset(
    {"AttributeError", "TypeError", "ImportError", "ModuleNotFoundError"}
)


def caller_package(path: str) -> str | None:
    """The driving program a frame's file belongs to (`.../site-packages/openrlhf/x.py`)."""
    found = _CALLER_FRAME.search(path)
    return found.group("pkg") if found else None


def caller_layer(
    layer: str, exception: str | None, callers: list[tuple[int, str]]
) -> tuple[str, str] | None:
    """Harness, when engine code raised an API-contract error on a call from a driving program:
    `callers` are (line, package) of the traceback's caller frames, outermost first. The layer
    of the code that raised it says where the message is printed, the caller where the fault
    lives (its use of the engine fits another release)."""
    if layer != "engine" or not callers or exception is None:
        return None
    if exception.rsplit(".", 1)[-1] not in API_CONTRACT_ERRORS:
        return None
    line, package = callers[-1]
    return (
        "harness",
        f"a {exception.rsplit('.', 1)[-1]} raised in the engine's code on a call from {package}"
        f" (its frame at line {line}): the caller uses the engine as another release defines it",
    )
