"""Failures that print their own place in the source: a Go panic located by its goroutine's
frames, an assertion by the file:line it prints; the layer from the project the path names, and
no cause inferred from the wrapper's lines around such a crash. Real text, each with a near miss.

Fixtures (tests/fixtures/native/, byte for byte from the threads):
- toolkit-1398-sigabrt-cgo.log: https://github.com/NVIDIA/nvidia-container-toolkit/issues/1398
- amd-ctk-59-nil-pointer.log: https://github.com/ROCm/container-toolkit/issues/59
- sd-webui-498-hook-fatal-signal.log:
  https://github.com/AbdBarho/stable-diffusion-webui-docker/issues/498
"""

from __future__ import annotations

from pathlib import Path

from triage.api import GO_FRAME, Engine, KnowledgeBase
from triage.catalog.layers import layer_of
from triage.catalog.native import (
    GO_FRAME_PATTERN,
    crash_shadow,
    function_place,
    go_place,
    inline_place,
    project_of,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "native"


def _top(engine: Engine, path: Path) -> dict[str, object]:
    report = engine.run([str(path)]).to_json_dict()
    hyps = report["hypotheses"]
    assert isinstance(hyps, list) and hyps
    top = hyps[0]
    assert isinstance(top, dict)
    return top


def test_scan_pattern_is_the_locators() -> None:
    assert GO_FRAME[1] == GO_FRAME_PATTERN


def test_go_panic_located_by_the_innermost_frame_of_a_known_project(engine: Engine) -> None:
    top = _top(engine, FIXTURES / "amd-ctk-59-nil-pointer.log")
    # the stdlib `log` frames above are skipped: not a known project
    assert (
        top["signature"]
        == "located:amd-container-toolkit:internal/amdgpu/amdgpu.go:GetAMDGPUsWithFS"
    )
    assert top["basis"] == "located" and top["layer"] == "node" and top["severity"] == "error"
    evidence = top["evidence"]
    assert isinstance(evidence, list) and evidence[0]["line"] == 3
    source = top["source"]
    assert isinstance(source, dict)
    assert source["kind"] == "Go panic (goroutine frame)" and source["line"] == 94


def test_hook_crash_is_located_and_no_cause_is_inferred_from_its_wrapper(engine: Engine) -> None:
    # docker's "Error response ... exit status 2" is a supporting tell of a container-toolkit
    # cause; beside a crash that names its own place it is that crash's report
    top = _top(engine, FIXTURES / "toolkit-1398-sigabrt-cgo.log")
    assert top["basis"] == "located" and top["layer"] == "node"
    # a cgo-generated file says nothing: the next frame, by its package path
    assert top["signature"] == (
        "located:nvidia-container-toolkit:internal/nvsandboxutils/nvsandboxutils.go:"
        "nvSandboxUtilsShutdown"
    )
    top = _top(engine, FIXTURES / "sd-webui-498-hook-fatal-signal.log")
    # the hook's stderr inside docker's one line; the vendored module's path names it
    assert top["signature"] == "located:go-nvml:pkg/dl/dl.go:DynamicLibrary.Open"
    assert top["layer"] == "node"


def test_near_miss_the_wrapper_line_alone_is_no_crash(engine: Engine, tmp_path: Path) -> None:
    # the same docker line with no crash text after it: nothing shadowed, nothing located, the
    # line stays unrecognized
    line = (FIXTURES / "toolkit-1398-sigabrt-cgo.log").read_text().splitlines()[1]
    wrapper = line.split(": free()")[0]
    assert crash_shadow([("x", 1, wrapper)], []) == set()
    log = tmp_path / "wrapper-only.log"
    log.write_text(wrapper + "\n")
    report = engine.run([str(log)])
    assert all(h.basis != "located" for h in report.hypotheses)
    assert [u.line for u in report.unrecognized] == [1]


def test_llama_cpp_line_located_by_the_function_it_prints(engine: Engine, tmp_path: Path) -> None:
    # corpus/model/moly-wasi-nn-llamacpp-tensor-not-within-file-bounds.log, with the one
    # signature that reads it left out: llama.cpp's log call names its function first
    only = Engine(KnowledgeBase([]))
    text = (
        "[2024-12-11 21:39:23.552] [error] [WASI-NN] llama.cpp: llama_model_load: error loading "
        "model: tensor 'blk.3.attn_qkv.weight' data is not within the file bounds, model is "
        "corrupted or incomplete\n"
    )
    log = tmp_path / "x.log"
    log.write_text(text)
    top = only.run([str(log)]).hypotheses[0]
    assert top.signature == "located:llama.cpp::llama_model_load" and top.layer == "engine"
    # the device probe of a GPU back end is the node's (its devices and driver)
    place = function_place(
        "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected"
    )
    assert place is not None and layer_of("llama.cpp", place.file, place.function)[0] == "node"
    # near misses: the same prefix on a line that states no failure, a word that only starts so
    assert function_place("llama_model_load: loaded meta data with 19 key-value pairs") is None
    assert function_place("my_llama_model_load: error in the app") is None


def test_go_runtime_fault_with_no_project_frame_is_the_runtimes() -> None:
    frames = [
        ("x", 6, "runtime.throw({0x12ed114?, 0x4026e8c0?})"),
        ("x", 7, "        runtime/panic.go:1023 +0x5c fp=0x7f3e47ffea30 sp=0x7f3e47ffea00"),
        ("x", 8, "runtime.findfunc(0x7f3e47ffeb60?)"),
        ("x", 9, "        runtime/symtab.go:791 +0x119 fp=0x7f3e47ffeab0 sp=0x7f3e47ffea90"),
    ]
    place = go_place("fatal error: index out of range", 3, frames, "x")
    assert place is not None
    assert (place.project, place.file, place.function) == (
        "go",
        "src/runtime/symtab.go",
        "findfunc",
    )
    # near miss: the same words in a Python log with no Go frames below are not a Go panic
    assert go_place("IndexError: index out of range", 3, [], "x") is None
    assert go_place('level=info msg="panic: recovered"', 3, frames, "x") is None


def test_assertions_located_by_the_path_they_print() -> None:
    # real lines: gpustack/llama-box#21 (GGML_ASSERT), NVIDIA/TensorRT-LLM#2708 (Assertion failed)
    ggml = inline_place(
        "/home/runner/work/llama-box/llama-box/llama.cpp/ggml/src/ggml-cuda/rope.cu:423: "
        "GGML_ASSERT(sections.v[0] > 0 || sections.v[1] > 0 || sections.v[2] > 0) failed"
    )
    assert ggml is not None and (ggml.project, ggml.file, ggml.line) == (
        "llama.cpp",
        "ggml/src/ggml-cuda/rope.cu",
        423,
    )
    trt = inline_place(
        "[TensorRT-LLM][ERROR] Assertion failed: mNextBlocks.empty() (/home/jenkins/agent/"
        "workspace/LLM/helpers/Build-x86_64/llm/cpp/tensorrt_llm/batch_manager/"
        "kvCacheManager.cpp:256)"
    )
    assert trt is not None and trt.project == "tensorrt-llm"
    assert trt.file == "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp"
    # near misses: a path with no failure words (a load message), a path of no known project
    assert inline_place("llama_model_load: loaded /models/ggml/src/x.cpp:12 meta data") is None
    assert inline_place("Assertion failed: x (/home/me/myapp/main.cpp:10)") is None
    assert project_of("/usr/lib/python3/dist-packages/foo.py") is None


def test_healthy_python_lines_are_not_go_frames(engine: Engine, tmp_path: Path) -> None:
    log = tmp_path / "healthy.log"
    log.write_text(
        "INFO 10-25 13:08:40 [api_server.py:1] vLLM API server version 0.10.0\n"
        "    self.model_runner.load_model()\n"
        "INFO 10-25 13:08:43 [metrics.py:455] Avg prompt throughput: 0.0\n"
    )
    report = engine.run([str(log)])
    assert report.hypotheses == [] and report.unrecognized == []
    # the Go frame pattern is scanned, but only a Go panic ever reads its hits
    assert go_place("    self.model_runner.load_model()", 1, [], "x") is None
