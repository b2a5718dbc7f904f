"""Generate a realistic, deterministic vLLM server log of a given size for the benchmark.

Mix (shares measured on real servers, see ../shared/research/performance.md): uvicorn access lines,
`Received request` lines with prompts (some non-ASCII, a few very long), periodic stats lines,
other INFO lines, benign warnings, start-up blocks with NCCL INFO and tqdm bars written with CR, ANSI
colour in some sessions, a few invalid UTF-8 bytes, and real failures with their tracebacks about
once per 100k lines.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

STARTUP = [
    "(APIServer pid={pid}) INFO {ts} [api_server.py:1839] vLLM API server version 0.11.0",
    "(APIServer pid={pid}) INFO {ts} [utils.py:233] non-default args: {{'model_tag': 'Qwen/Qwen3-8B', 'tensor_parallel_size': 2, 'gpu_memory_utilization': 0.9}}",
    "(EngineCore_DP0 pid={pid2}) INFO {ts} [core.py:93] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B'",
    "gpu-node-3:{pid2}:{pid2} [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "gpu-node-3:{pid2}:{pid2} [0] NCCL INFO Failed to initialize NET plugin IB",
    "gpu-node-3:{pid2}:{pid2} [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>",
    "(Worker_TP0 pid={pid2}) INFO {ts} [gpu_model_runner.py:2653] Model loading took 15.26 GiB and 8.1 seconds",
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.92it/s]\rLoading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.95it/s]",
    "(EngineCore_DP0 pid={pid2}) INFO {ts} [kv_cache_utils.py:1087] GPU KV cache size: 415,360 tokens",
    "(EngineCore_DP0 pid={pid2}) WARNING {ts} [fused_moe.py:727] Using default MoE config. Performance might be sub-optimal! Config file not found at /usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/fused_moe/configs/E=128,N=768,device_name=NVIDIA_H200.json",
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|\u2588\u2588\u2588\u2588\u2588\u2588| 67/67 [00:07<00:00,  8.75it/s]",
    "(EngineCore_DP0 pid={pid2}) INFO {ts} [gpu_model_runner.py:3480] Graph capturing finished in 9 secs, took 0.52 GiB",
    "(APIServer pid={pid}) INFO:     Application startup complete.",
]
FAILURES = [
    [
        "(Worker_TP1 pid={pid2}) ERROR {ts} [multiproc_executor.py:654] WorkerProc hit an exception.",
        "(Worker_TP1 pid={pid2}) ERROR {ts} [multiproc_executor.py:654] Traceback (most recent call last):",
        '(Worker_TP1 pid={pid2}) ERROR {ts} [multiproc_executor.py:654]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 447, in execute_model',
        "(Worker_TP1 pid={pid2}) ERROR {ts} [multiproc_executor.py:654] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 139.81 GiB of which 1.06 GiB is free.",
    ],
    [
        "[rank1]:[E1129 18:43:39.853 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1829, OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.",
    ],
    [
        "[ 8812.123456] NVRM: Xid (PCI:0000:3d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    ],
    [
        "(EngineCore_DP0 pid={pid2}) ERROR {ts} [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP0 pid={pid2}) ERROR {ts} [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    ],
]
# Prompt text. "natural": everyday English, where words such as "error" or "cache" occur at a
# natural rate; "technical": a small vocabulary dense in log words ("error", "warning", "cache",
# "system"), a stress case in which many signature literals occur in every prompt.
VOCABULARIES = {
    "natural": [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "you",
        "that",
        "it",
        "he",
        "was",
        "for",
        "on",
        "are",
        "as",
        "with",
        "his",
        "they",
        "at",
        "be",
        "this",
        "have",
        "from",
        "or",
        "one",
        "had",
        "by",
        "word",
        "but",
        "not",
        "what",
        "all",
        "were",
        "we",
        "when",
        "your",
        "can",
        "said",
        "there",
        "use",
        "an",
        "each",
        "which",
        "she",
        "do",
        "how",
        "their",
        "if",
        "will",
        "up",
        "other",
        "about",
        "out",
        "many",
        "then",
        "them",
        "these",
        "so",
        "some",
        "her",
        "would",
        "make",
        "like",
        "him",
        "into",
        "time",
        "has",
        "look",
        "two",
        "more",
        "write",
        "go",
        "see",
        "number",
        "no",
        "way",
        "could",
        "people",
        "my",
        "than",
        "first",
        "water",
        "been",
        "call",
        "who",
        "oil",
        "its",
        "now",
        "find",
        "long",
        "down",
        "day",
        "did",
        "get",
        "come",
        "made",
        "may",
        "part",
        "please",
        "explain",
        "summarise",
        "translate",
        "story",
        "poem",
        "recipe",
        "travel",
        "history",
        "science",
        "music",
        "code",
        "python",
        "function",
        "write",
        "list",
        "table",
        "weather",
        "city",
        "country",
        "price",
        "plan",
        "email",
        "letter",
        "meeting",
        "question",
        "answer",
        "example",
        "help",
        "idea",
        "difference",
        "between",
        "best",
        "simple",
        "short",
        "detailed",
        "step",
    ],
    "technical": [
        "the",
        "model",
        "serving",
        "request",
        "token",
        "latency",
        "throughput",
        "prompt",
        "answer",
        "question",
        "explain",
        "summarise",
        "translate",
        "error",
        "warning",
        "result",
        "value",
        "system",
        "user",
        "assistant",
        "cache",
    ],
}
WORDS = VOCABULARIES["natural"]
NON_ASCII = ("résumé", "naïve", "日本語の質問", "Привет", "emoji 🚀", "Straße")


# vLLM with --enable-log-requests: one `Received request <id>: prompt: '...'` line per request
# (12% of the lines, about a third of the bytes); off: those lines are `Added request` lines.
REQUEST_LOGGING = True


def ts(r: random.Random) -> str:
    return f"{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"


def prompt(r: random.Random) -> str:
    n = int(r.lognormvariate(3.5, 1.0))
    if r.random() < 0.01:
        n = r.randint(1000, 8000)
    words = [r.choice(WORDS) for _ in range(min(n, 20000))]
    if r.random() < 0.06:
        words.append(r.choice(NON_ASCII))
    return " ".join(words)


def line(r: random.Random, pid: int) -> str:
    x = r.random()
    t = ts(r)
    if x < 0.38:
        status = r.choices(
            ["200 OK", "400 Bad Request", "404 Not Found", "429 Too Many Requests"],
            [0.99, 0.005, 0.003, 0.002],
        )[0]
        return f'(APIServer pid={pid}) INFO:     10.1.{r.randint(0, 255)}.{r.randint(0, 255)}:{r.randint(1024, 65535)} - "POST /v1/chat/completions HTTP/1.1" {status}'
    if x < 0.50 and REQUEST_LOGGING:
        rid = f"chatcmpl-{r.getrandbits(64):016x}"
        return f"(APIServer pid={pid}) INFO {t} [logger.py:41] Received request {rid}: prompt: '{prompt(r)}', params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=512), lora_request: None."
    if x < 0.60:
        return (
            f"(APIServer pid={pid}) INFO {t} [loggers.py:123] Engine 000: Avg prompt throughput: {r.uniform(0, 9000):.1f} tokens/s, "
            f"Avg generation throughput: {r.uniform(1, 3000):.1f} tokens/s, Running: {r.randint(1, 64)} reqs, Waiting: {r.randint(0, 9)} reqs, "
            f"GPU KV cache usage: {r.uniform(0, 95):.1f}%, Prefix cache hit rate: {r.uniform(0, 60):.1f}%"
        )
    if x < 0.96:
        rid = f"chatcmpl-{r.getrandbits(64):016x}"
        return f"(APIServer pid={pid}) INFO {t} [async_llm.py:261] Added request {rid}."
    return f"(APIServer pid={pid}) WARNING {t} [protocol.py:93] The following fields were present in the request but ignored: {{'stream_options'}}"


def generate(path: Path, size: int, seed: int = 7) -> None:
    r = random.Random(seed)
    written = 0
    next_startup = 0
    n = 0
    with path.open("wb") as fh:
        while written < size:
            pid = 1000 + (written >> 20)
            if written >= next_startup:
                color = r.random() < 0.4
                for tmpl in STARTUP:
                    text = tmpl.format(pid=pid, pid2=pid + 7, ts=ts(r))
                    if color and text.startswith("("):
                        text = "\x1b[1;36m" + text.replace(") ", ")\x1b[0;0m ", 1)
                    data = (text + "\n").encode()
                    fh.write(data)
                    written += len(data)
                next_startup = written + r.randint(20 << 20, 40 << 20)
            n += 1
            if n % 100_000 == 0:
                block = r.choice(FAILURES)
                for tmpl in block:
                    data = (tmpl.format(pid=pid, pid2=pid + 7, ts=ts(r)) + "\n").encode()
                    fh.write(data)
                    written += len(data)
            if n % 250_000 == 0:
                fh.write(b"INFO invalid utf-8 here: \xff\xfe\xc3\x28\n")
            data = (line(r, pid) + "\n").encode()
            fh.write(data)
            written += len(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("path", type=Path)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--vocabulary",
        choices=sorted(VOCABULARIES),
        default="natural",
        help="prompt words (natural English, or a stress case dense in log words)",
    )
    ap.add_argument(
        "--request-logging",
        choices=("on", "off"),
        default="on",
        help="log every request's prompt (vLLM --enable-log-requests), or only 'Added request'",
    )
    args = ap.parse_args()
    global WORDS, REQUEST_LOGGING
    WORDS = VOCABULARIES[args.vocabulary]
    REQUEST_LOGGING = args.request_logging == "on"
    generate(args.path, args.size_mb << 20, args.seed)


if __name__ == "__main__":
    main()
