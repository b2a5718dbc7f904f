"""The caller's layer (issue 16, point 1): an API-contract error (AttributeError, TypeError,
ImportError) that engine code raises on a call from a program driving the engine in-process (an
RL trainer, an evaluation suite) is located in the engine's source but lives in the harness. Real
lines from audits/round-12 (OpenRLHF on vLLM 0.8, github.com/OpenRLHF/OpenRLHF), each with a
near miss that keeps the engine layer."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run_text
from triage.api import Engine, KnowledgeBase
from triage.catalog.layers import caller_layer, caller_package

PREFIX = "(ActorModelRayActor pid=700388) "
CALLER = (
    'File "~/.virtualenvs/env/lib/python3.12/site-packages/openrlhf/trainer/ray/vllm_engine.py",'
    " line 58, in init_process_group"
)
ENGINE_FRAME = (
    'File "~/.virtualenvs/env/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 495,'
    " in collective_rpc"
)
ATTRIBUTE = "AttributeError: 'LLMEngine' object has no attribute 'model_executor'"


def _traceback(*frames: str, exception: str = ATTRIBUTE) -> str:
    body = ["Traceback (most recent call last):"]
    for frame in frames:
        body += [frame, "return self.llm.collective_rpc(", "^^^^^^^^^^^^^^^^^^^^^^^^"]
    body.append(exception)
    return "".join(PREFIX + line + "\n" for line in body)


def _located(tmp_path: Path, text: str) -> tuple[str, list[str]]:
    report = run_text(Engine(KnowledgeBase([])), text, tmp_path)
    located = [h for h in report.hypotheses if h.basis == "located"]
    assert located, report.unrecognized
    return located[0].layer, located[0].explain


def test_engine_attribute_error_on_a_trainers_call_lives_in_the_harness(tmp_path: Path) -> None:
    layer, explain = _located(tmp_path, _traceback(CALLER, ENGINE_FRAME))
    assert layer == "harness"
    assert any("call from openrlhf" in line for line in explain), explain


def test_near_miss_the_same_error_without_a_driving_program_stays_in_the_engine(
    tmp_path: Path,
) -> None:
    layer, _ = _located(tmp_path, _traceback(ENGINE_FRAME))
    assert layer == "engine"


def test_near_miss_a_frame_of_an_earlier_traceback_is_not_the_caller(tmp_path: Path) -> None:
    # the trainer's frame belongs to a traceback that ended 20 lines before this one began
    earlier = _traceback(CALLER, exception="ValueError: earlier")
    gap = "".join(f"{PREFIX}step {i}\n" for i in range(20))
    layer, _ = _located(tmp_path, earlier + gap + _traceback(ENGINE_FRAME))
    assert layer == "engine"


def test_only_api_contract_errors_move_and_only_from_the_engine() -> None:
    callers = [(4, "openrlhf")]
    assert caller_layer("engine", "TypeError", callers) is not None
    assert caller_layer("engine", "ImportError", callers) is not None
    # an engine failure met on a trainer's call is still the engine's (memory, a kernel, a value)
    assert caller_layer("engine", "torch.OutOfMemoryError", callers) is None
    assert caller_layer("engine", "ValueError", callers) is None
    # a node-layer site (a socket, a transport) stays where it is
    assert caller_layer("node", "AttributeError", callers) is None
    assert caller_layer("engine", "AttributeError", []) is None


def test_caller_packages_are_read_from_the_frame_path() -> None:
    assert caller_package("/x/site-packages/verl/workers/rollout/vllm_rollout.py") == "verl"
    assert caller_package("/share/OpenRLHF/openrlhf/trainer/ray/vllm_engine.py") == "openrlhf"
    assert caller_package("/usr/lib/python3.12/site-packages/vllm/entrypoints/llm.py") is None
    # a package whose name only contains a caller's name is not that caller
    assert caller_package("/x/site-packages/trlx_utils/run.py") is None
    assert caller_package("/x/site-packages/myverl/run.py") is None


def test_layer_rows_by_file_and_function() -> None:
    from triage.catalog.layers import layer_of

    # the catalog stores SGLang's and Ray's files under python/: their rows match that path
    assert layer_of("sglang", "python/sglang/srt/models/deepseek_vl2.py")[0] == "model"
    assert layer_of("sglang", "python/sglang/srt/managers/scheduler.py")[0] == "engine"
    # a function picks one job of a file: load_state_dict reads the checkpoint ...
    assert layer_of("torch", "torch/nn/modules/module.py", "Module.load_state_dict")[0] == "model"
    # ... the rest of the module's code does not
    assert layer_of("torch", "torch/nn/modules/module.py", "Module.__getattr__")[0] == "engine"
    # device enumeration is the node's, the caching allocator the engine's
    cuda = "c10/cuda/CUDAFunctions.cpp"
    assert layer_of("torch-cpp", cuda, "device_count_impl")[0] == "node"
    assert layer_of("torch-cpp", "c10/cuda/CUDACachingAllocator.cpp", "malloc")[0] == "engine"
    # torchrun's rendezvous is how the job was launched; the store's socket is the network
    rdzv = "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py"
    assert layer_of("torch", rdzv, "run")[0] == "harness"
    assert layer_of("torch", "torch/csrc/distributed/c10d/TCPStore.cpp", "")[0] == "node"


def test_a_runtime_error_takes_the_layer_of_the_frame_it_arose_in(tmp_path: Path) -> None:
    # a config.json that is not JSON, read by transformers (the AniPortrait case in corpus/model):
    # the JSON decoder's message is the runtime's, the frame above it says whose read failed
    frames = (
        "Traceback (most recent call last):\n"
        '  File "/env/lib/python3.10/site-packages/transformers/configuration_utils.py", '
        "line 661, in _get_config_dict\n"
        "    config_dict = cls._dict_from_json_file(resolved_config_file)\n"
        '  File "/env/lib/python3.10/site-packages/transformers/configuration_utils.py", '
        "line 760, in _dict_from_json_file\n"
        "    return json.loads(text)\n"
    )
    error = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
    layer, explain = _located(tmp_path, frames + error)
    assert layer == "model", explain
    # near miss: the same message with no traceback keeps the runtime's default layer
    layer, _ = _located(tmp_path, error)
    assert layer == "engine"
