"""Generalization mechanics (issue 16): inferred hypotheses, severity from the evidence, launch
scoping, the time window across inputs, variants that lead only with their own evidence,
contradicted branches, branch layers, continuation lines. Each on real lines (corpus cases, the
audit's repro commands, signature examples), each with a near miss that must not change."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers import run_text
from triage import api
from triage.api import Engine, KnowledgeBase, RunOptions
from triage.models import Hypothesis, Report
from triage.render.json import render_json

CORPUS = ROOT / "corpus"
EXAMPLE = ROOT / "examples" / "vllm-kv-cache-oom.log"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _by_id(report: Report, sig: str) -> Hypothesis:
    return next(h for h in report.hypotheses if h.signature == sig)


# --- 2. supporting tells as hypotheses (basis "inferred") ---------------------------------------


def test_supporting_tell_becomes_inferred_hypothesis_when_decisive_line_is_cut(
    engine: Engine, tmp_path: Path
) -> None:
    # corpus/node/host-oom-amazon-linux-python.log without its decisive 'Out of memory: Killed
    # process' line: the kernel's oom-kill summary line alone still says which cause it is
    oom_kill = _lines(CORPUS / "node" / "host-oom-amazon-linux-python.log")[0]
    report = run_text(engine, oom_kill + "\n", tmp_path)
    top = report.hypotheses[0]
    assert (top.signature, top.basis) == ("host-oom-killer", "inferred")
    assert [e.line for e in top.evidence] == [1] and top.evidence[0].role == "supporting"
    assert top.score <= 0.5 and report.failed
    assert any("inferred" in t for t in top.explain)


def test_near_miss_decisive_line_present_stays_decisive(engine: Engine, tmp_path: Path) -> None:
    text = (CORPUS / "node" / "host-oom-amazon-linux-python.log").read_text()
    top = run_text(engine, text, tmp_path).hypotheses[0]
    assert (top.signature, top.basis) == ("host-oom-killer", "decisive")


def test_near_miss_info_context_is_not_a_tell(engine: Engine, tmp_path: Path) -> None:
    # The KV-cache example without its decisive ValueError: 'Available KV cache memory: -5.34 GiB'
    # and 'Model loading took' are INFO context, so the symptom stays the honest answer.
    lines = _lines(EXAMPLE)
    cut = [line for i, line in enumerate(lines, 1) if i != 10]
    report = run_text(engine, "\n".join(cut) + "\n", tmp_path)
    assert report.hypotheses[0].signature == "engine-core-init-failed"
    assert all(h.basis == "decisive" for h in report.hypotheses)


def test_traceback_frames_are_not_tells(engine: Engine, tmp_path: Path) -> None:
    # corpus/engine/cuda-seed-e24-oom-load-draft-model.log without its OutOfMemoryError line: the
    # frame 'in load_model' and the source line under it say where the failure passed, not what
    # it was; the honest answer is the symptom, not an inferred OOM
    lines = _lines(CORPUS / "engine" / "cuda-seed-e24-oom-load-draft-model.log")
    report = run_text(engine, "\n".join(lines[:2] + lines[3:]) + "\n", tmp_path)
    assert report.hypotheses[0].signature == "engine-core-init-failed"
    assert all(h.basis != "inferred" for h in report.hypotheses)


def test_generic_prefix_of_the_failure_line_is_not_a_tell(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    # a llama.cpp load failure whose own detail no signature of this knowledge base reads (its
    # signature left out): `error loading model`, a supporting pattern of the wrong-number-of-
    # tensors cause, matches only the line's generic prefix, so no cause is inferred from it
    only = Engine(KnowledgeBase([kb.by_id["llamacpp-wrong-number-of-tensors"]]))
    # the corpus line of corpus/model/moly-wasi-nn-llamacpp-tensor-not-within-file-bounds.log
    line = (
        "[2024-12-11 21:39:23.552] [error] [WASI-NN] llama.cpp: llama_model_load: error loading "
        "model: tensor 'blk.3.attn_qkv.weight' data is not within the file bounds, model is "
        "corrupted or incomplete"
    )
    report = run_text(only, line + "\n", tmp_path)
    # the line stays the answer: located by the function llama.cpp printed, no inferred cause
    assert [(h.basis, h.signature) for h in report.hypotheses] == [
        ("located", "located:llama.cpp::llama_model_load")
    ]


def test_generic_prefix_before_a_named_file_is_not_a_tell(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    # audits/round-16/model/llamacpp-mmproj-old-format-projector-type-empty.log: `failed to load
    # model` (a supporting pattern of the pre-tokenizer cause) reads the prefix; the quoted file
    # and the detail after it are the failure
    only = Engine(KnowledgeBase([kb.by_id["llamacpp-unknown-pre-tokenizer"]]))
    line = (
        "clip_init: failed to load model 'mmproj-obsidian-f16.gguf': load_hparams: unknown "
        "projector type: "
    )
    report = run_text(only, line + "\n", tmp_path)
    assert all(h.basis != "inferred" for h in report.hypotheses)


def test_a_note_is_never_inferred(engine: Engine, tmp_path: Path) -> None:
    # audits/round-16/node/mooncake-transfer-engine-no-rdma-device-in-docker.log: a flag dump's
    # `--device_name=erdma_0` is a supporting line of the info note default-moe-config; beside
    # an RDMA failure it must not become an (inferred) answer
    text = (
        ROOT
        / "audits"
        / "round-16"
        / "node"
        / "mooncake-transfer-engine-no-rdma-device-in-docker.log"
    ).read_text()
    report = run_text(engine, text, tmp_path)
    assert all(h.signature != "default-moe-config" for h in report.hypotheses)
    # near miss: the note's own decisive line still reports it (info)
    note = _lines(CORPUS / "healthy" / "vllm-0.8-default-moe-config-warning-h100.log")[0]
    top = run_text(engine, note + "\n", tmp_path, name="note.log").hypotheses[0]
    assert (top.signature, top.severity, top.basis) == ("default-moe-config", "info", "decisive")


def test_near_miss_a_tell_on_the_failure_line_that_reads_its_detail(
    engine: Engine, tmp_path: Path
) -> None:
    # the pattern `pull access denied` reads the failure's own words: still a tell
    text = (
        CORPUS / "harness" / "docker-pull-nvcr-private-repository-access-denied.log"
    ).read_text()
    top = run_text(engine, text, tmp_path).hypotheses[0]
    assert (top.signature, top.basis) == ("k8s-image-pull-backoff", "inferred")


def test_near_miss_whole_traceback_keeps_its_decisive_cause(engine: Engine, tmp_path: Path) -> None:
    text = (CORPUS / "engine" / "cuda-seed-e24-oom-load-draft-model.log").read_text()
    top = run_text(engine, text, tmp_path).hypotheses[0]
    assert (top.signature, top.basis) == ("cuda-oom-loading-draft-model", "decisive")
    assert 3 in [e.line for e in top.evidence]


def test_inferred_symptom_cause_below_every_decisive_cause(engine: Engine, tmp_path: Path) -> None:
    # fabric manager: a decisive warning (no NVSwitch) beside the service's failed exit; the
    # supporting-only version-mismatch signature must rank below the decisive one
    log = CORPUS / "node" / "fabric-manager-start-sh-nothing-to-do-4090.log"
    report = engine.run([str(log)])
    assert report.hypotheses[0].signature == "fabric-manager-no-nvswitch"
    for hyp in report.hypotheses[1:]:
        if hyp.basis == "inferred":
            assert hyp.score < report.hypotheses[0].score


# --- 3. severity and exit from the evidence ----------------------------------------------------

EDAC_UE = (
    "[11189.970968] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 "
    "(channel:2 slot:0 page:0xb757589 offset:0x140 grain:32 -  OVERFLOW err_code:0101:0092 "
    "socket:1 imc:1 rank:0 bg:3 ba:0 row:1a1e8 col:180)"
)
EDAC_CE = (
    "May  7 06:45:12 errol kernel: [21584690.529877] EDAC MC0: 4 CE error on "
    "CPU#0Channel#2_DIMM#0 (channel:2 slot:0 page:0x0 offset:0x0 grain:8 syndrome:0x0)"
)


def test_edac_uncorrected_error_escalates_to_a_failure(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, EDAC_UE + "\n", tmp_path)
    top = _by_id(report, "machine-check-exception")
    assert top.severity == "error" and report.failed
    assert any("escalated: edac_kind=UE" in t for t in top.explain)


def test_near_miss_edac_corrected_error_stays_a_warning(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, EDAC_CE + "\n", tmp_path)
    assert _by_id(report, "machine-check-exception").severity == "warning"
    assert not report.failed


XID45_AFTER_149 = (
    "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by "
    "previous Xid 149"
)
XID45_ALONE = "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001"


def test_xid_naming_its_previous_xid_routes_to_that_signature(
    engine: Engine, tmp_path: Path
) -> None:
    report = run_text(engine, XID45_AFTER_149 + "\n", tmp_path)
    top = report.hypotheses[0]
    assert top.signature == "nvidia-xid-74-nvlink-error" and top.severity == "error"
    assert top.captures.get("xid") == "149" and top.evidence[0].line == 1
    assert [e.signature for e in top.explains] == ["nvidia-xid-45-preemptive-cleanup"]
    assert report.failed


def test_near_miss_xid_45_alone_stays_a_warning(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, XID45_ALONE + "\n", tmp_path)
    assert [h.signature for h in report.hypotheses] == ["nvidia-xid-45-preemptive-cleanup"]
    assert report.hypotheses[0].severity == "warning" and not report.failed


AER_CORRECTED = (
    "Sep 19 16:18:02 bubz kernel: [68183.615810] pcieport 0000:00:03.1: PCIe Bus Error: "
    "severity=Correctable, type=Data Link Layer, (Transmitter ID)"
)
GPU_LOST = "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus."


def test_aer_corrected_with_a_lost_gpu_is_a_failure(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, AER_CORRECTED + "\n" + GPU_LOST + "\n", tmp_path)
    aer = next((h for h in report.hypotheses if h.signature == "pcie-aer-corrected-errors"), None)
    # either its own failure, or explained by the lost GPU; never a lone warning
    if aer is not None:
        assert aer.severity == "error"
    assert report.failed


def test_near_miss_aer_corrected_alone_stays_a_warning(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, AER_CORRECTED + "\n", tmp_path)
    assert _by_id(report, "pcie-aer-corrected-errors").severity == "warning"
    assert not report.failed


SHM_WAIT = _lines(CORPUS / "engine" / "vllm-shm-broadcast-wait-dsv4-spark.log")[0]


def test_repeated_hang_symptom_with_nothing_explaining_it_is_a_failure(
    engine: Engine, tmp_path: Path
) -> None:
    # the same real line, every 60 s for five minutes
    lines = [SHM_WAIT.replace("11:16:19", f"11:{16 + i}:19") for i in range(5)]
    report = run_text(engine, "\n".join(lines) + "\n", tmp_path)
    top = report.hypotheses[0]
    assert top.signature == "vllm-shm-broadcast-wait" and top.severity == "error"
    assert report.failed
    assert any("repeated 5 times" in t for t in top.explain)


def test_near_miss_two_hang_lines_stay_a_warning(engine: Engine, tmp_path: Path) -> None:
    lines = [SHM_WAIT.replace("11:16:19", f"11:{16 + i}:19") for i in range(2)]
    report = run_text(engine, "\n".join(lines) + "\n", tmp_path)
    assert report.hypotheses[0].severity == "warning" and not report.failed


# --- 5. one launch at a time; the time window across inputs ------------------------------------

HEALTHY_LAUNCH = CORPUS / "healthy" / "vllm-0.10-qwen2-7b-a100-startup-wrapped.log"


def test_facts_and_supporting_lines_come_from_the_failing_launch(
    engine: Engine, tmp_path: Path
) -> None:
    # the audit's D3: a journal that spans a restart (a healthy 0.10 launch, then the failing one)
    first = HEALTHY_LAUNCH.read_text()
    report = run_text(engine, first + EXAMPLE.read_text(), tmp_path, "restart.log")
    offset = len(first.splitlines())
    assert report.facts["vllm_version"] == "0.11.0"
    assert report.facts["model"] == "deepseek-ai/DeepSeek-V3"
    top = report.hypotheses[0]
    assert top.signature == "kv-cache-no-memory"
    assert all(e.line > offset for e in top.evidence), [(e.line, e.role) for e in top.evidence]
    # each launch's start banner ('vLLM API server version'): line 2 of the first, 1 of the second
    assert report.inputs[0].launches == [2, offset + 1]


def test_near_miss_one_launch_has_no_launch_list(engine: Engine) -> None:
    report = engine.run([str(EXAMPLE)])
    assert report.inputs[0].launches == []
    assert report.facts["vllm_version"] == "0.11.0"
    assert {e.line for e in report.hypotheses[0].evidence} >= {4, 5, 10}


def _xid_log(tmp_path: Path, stamp: str) -> Path:
    path = tmp_path / "xid.log"
    path.write_text(
        f"{stamp} host kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python3, "
        "GPU has fallen off the bus.\n"
        f"{stamp} host kernel: NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.\n"
    )
    return path


def test_node_event_from_another_day_does_not_explain_the_engine_failure(
    engine: Engine, tmp_path: Path
) -> None:
    # the audit's D23: the example (stamped 10-25 13:08) beside an Xid 79 of a month later
    xid = _xid_log(tmp_path, "2026-11-29T10:17:44+0000")
    report = engine.run([str(EXAMPLE), str(xid)])
    names = [h.signature for h in report.hypotheses]
    assert names[:2] == ["kv-cache-no-memory", "gpu-fallen-off-the-bus"]
    node = report.hypotheses[1]
    assert not node.explains
    assert any("min apart" in t for t in node.explain)


def test_near_miss_node_event_in_the_same_minutes_explains_it(
    engine: Engine, tmp_path: Path
) -> None:
    xid = _xid_log(tmp_path, "2026-10-25T13:08:30+0000")
    report = engine.run([str(EXAMPLE), str(xid)])
    top = report.hypotheses[0]
    assert top.signature == "gpu-fallen-off-the-bus"
    assert "engine-core-init-failed" in {e.signature for e in top.explains}


# --- 6. specific only with its own evidence; contradicted branches; continuation lines ---------

OOM_LINE = (
    "(Worker_TP0 pid=160) ERROR 05-20 20:54:32 [multiproc_executor.py:962] "
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 136.00 MiB. GPU 0 has a total "
    "capacity of 23.56 GiB of which 117.38 MiB is free. Including non-PyTorch memory, this process "
    "has 22.82 GiB memory in use."
)


def test_generic_oom_leads_its_variants_without_their_evidence(
    engine: Engine, tmp_path: Path
) -> None:
    # a runtime OOM (noonghunna/club-3090#138) in worker_busy_loop, no phase-specific frame
    text = (
        OOM_LINE + "\n"
        "(Worker_TP0 pid=160) ERROR 05-20 20:54:32 [multiproc_executor.py:962] "
        "Traceback (most recent call last):\n"
        '(Worker_TP0 pid=160) ERROR 05-20 20:54:32 [multiproc_executor.py:962]   File "/usr/local/'
        'lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 957, in '
        "worker_busy_loop\n"
    )
    top = run_text(engine, text, tmp_path).hypotheses[0]
    assert top.signature == "cuda-out-of-memory"
    assert "cuda-oom-sampler" in top.alternatives


def test_near_miss_variant_with_its_own_evidence_leads(engine: Engine) -> None:
    log = CORPUS / "engine" / "vllm-0.8-sampler-warmup-oom-256-dummy-requests.log"
    assert engine.run([str(log)]).hypotheses[0].signature == "cuda-oom-sampler"


NCCL_NO_IB = (
    "ae05277d311f:55933:55933 [1] NCCL INFO NET/IB : No device found.\n"
    "ae05277d311f:55933:55933 [1] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>\n"
    "(VllmWorkerProcess pid=675597) ERROR 09-25 06:40:46 multiproc_worker_utils.py:226] "
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
)


def test_branch_the_log_contradicts_is_never_likely(engine: Engine, tmp_path: Path) -> None:
    # the audit's D6: 'NET/IB : No device found' says IB is not used
    top = _by_id(run_text(engine, NCCL_NO_IB, tmp_path), "nccl-unhandled-system-error")
    ib = next(d for d in top.differential if d.branch == "ib-verbs")
    assert not ib.favoured and ib.ruled_out and "No device found" in ib.ruled_out[0]
    assert not any(f.likely and "locked-memory" in f.do for f in top.fixes)


def test_near_miss_ib_in_use_keeps_the_branch(engine: Engine, tmp_path: Path) -> None:
    text = NCCL_NO_IB.replace(
        "NET/IB : No device found.", "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>"
    )
    top = _by_id(run_text(engine, text, tmp_path), "nccl-unhandled-system-error")
    ib = next(d for d in top.differential if d.branch == "ib-verbs")
    assert ib.favoured and not ib.ruled_out
    assert top.layer == "node"  # the favoured branch's layer: the host's fabric


def test_multi_line_aer_block_joins_the_evidence(engine: Engine) -> None:
    log = CORPUS / "node" / "aer-uncorrected-fatal-gpu-root-port.log"
    top = engine.run([str(log)]).hypotheses[0]
    roles = {e.line: e.role for e in top.evidence}
    assert roles[4] == roles[5] == "decisive"
    assert [n for n, r in roles.items() if r == "continuation"] == [6, 7, 8]


def test_near_miss_distant_aer_line_is_not_a_continuation(engine: Engine, tmp_path: Path) -> None:
    lines = _lines(CORPUS / "node" / "aer-uncorrected-fatal-gpu-root-port.log")
    # the status line moved 20 lines away from its header is no longer part of the block
    text = "\n".join(lines[:5] + ["[  +0.000001] x"] * 20 + lines[5:6]) + "\n"
    top = run_text(engine, text, tmp_path).hypotheses[0]
    assert not [e for e in top.evidence if e.role == "continuation"]


# --- 1. branch layers and launchers -------------------------------------------------------------

UNRECOGNIZED = "vllm: error: unrecognized arguments: --omni\n"  # vllm-project/vllm#34545


def test_argument_error_built_by_a_launcher_lands_in_harness(
    engine: Engine, tmp_path: Path
) -> None:
    text = (
        '  File "/usr/local/lib/python3.10/dist-packages/runpod/serverless/worker.py", line 44, '
        "in run_worker\n" + UNRECOGNIZED
    )
    report = run_text(engine, text, tmp_path)
    top = _by_id(report, "vllm-unrecognized-arguments")
    assert report.facts["launcher"] == "runpod"
    assert top.layer == "harness"
    assert any("branch built-by-launcher" in t for t in top.explain)


def test_near_miss_argument_error_without_launcher_stays_engine(
    engine: Engine, tmp_path: Path
) -> None:
    report = run_text(engine, UNRECOGNIZED, tmp_path)
    assert "launcher" not in report.facts
    assert _by_id(report, "vllm-unrecognized-arguments").layer == "engine"


def test_inferred_basis_is_the_same_with_jobs(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the tell waits in one worker's range; the parent confirms it as one process would
    oom_kill = _lines(CORPUS / "node" / "host-oom-amazon-linux-python.log")[0]
    healthy = (CORPUS / "healthy" / "vllm-0.10-qwen2-7b-a100-startup-wrapped.log").read_text()
    path = tmp_path / "big.log"
    path.write_text(healthy * 40 + oom_kill + "\n" + healthy * 40)
    monkeypatch.setattr(api, "PARALLEL_MIN_BYTES", 0)
    single = Engine(kb, RunOptions(digest=False)).run([str(path)])
    several = Engine(kb, RunOptions(digest=False, jobs=2)).run([str(path)])
    assert single.hypotheses[0].basis == "inferred"
    assert render_json(several) == render_json(single)


def test_nvrm_notice_spread_over_lines_joins_the_evidence(engine: Engine) -> None:
    # the driver's three-line "fallen off the bus" notice: its middle line is part of the block;
    # the module-loading line two lines later is not (a near miss inside the same window)
    log = CORPUS / "node" / "gpu-fallen-off-bus-multiline-no-xid.log"
    top = engine.run([str(log)]).hypotheses[0]
    roles = {e.line: e.role for e in top.evidence}
    assert top.signature == "gpu-fallen-off-the-bus"
    assert roles[3] == "decisive" and roles[2] == "continuation"
    assert 5 not in roles


def test_a_configuration_stated_in_code_is_not_a_tell(engine: Engine, tmp_path: Path) -> None:
    # corpus/model/fastchat-vicuna13b-vllm-failed-to-load-tokenizer.log pastes the reporter's
    # code under the error: `tensor_parallel_size=2` there says how the engine was launched, so
    # no TP cause is inferred from it (it was, before: tp-size-not-divisible-shard ranked first)
    failure = "RuntimeError: Failed to initialise the custom loader for this checkpoint\n"
    code = '`llm = LLM("lmsys/vicuna-13b-v1.3", tensor_parallel_size=2)`\n'
    report = run_text(engine, failure + "\nMy code:\n" + code, tmp_path)
    assert not [h for h in report.hypotheses if h.basis == "inferred"]
    assert report.unrecognized  # the failure is still located, exit 1
    # near miss: the same value stated by an error record is still a tell
    record = "ERROR 01-01 12:00:00 [engine.py:1] tensor_parallel_size=2 is not supported here\n"
    report = run_text(engine, failure + record, tmp_path)
    assert "tp-size-not-divisible-shard" in [h.signature for h in report.hypotheses]


def test_a_shell_command_with_its_environment_is_not_a_tell(engine: Engine, tmp_path: Path) -> None:
    # audits/round-13/harness/simplear-trl-016-dev-cli-invalid-choice-vllm-serve.log: the pasted
    # command `CUDA_VISIBLE_DEVICES=0 trl vllm-serve ...` says how it was launched; the failure is
    # the CLI's own error line (an older TRL without the subcommand), not a GPU that is not visible
    # (no-gpu-visible-to-process was inferred from the command and ranked first)
    log = ROOT / "audits" / "round-13" / "harness"
    text = (log / "simplear-trl-016-dev-cli-invalid-choice-vllm-serve.log").read_text()
    report = run_text(engine, text, tmp_path)
    assert "no-gpu-visible-to-process" not in [h.signature for h in report.hypotheses]
    assert report.failed
    # near miss: the same variable in an error record is still a tell
    record = "ERROR 01-01 12:00:00 [platform.py:1] CUDA_VISIBLE_DEVICES=0 but no device was found\n"
    report = run_text(engine, record, tmp_path)
    assert "no-gpu-visible-to-process" in [h.signature for h in report.hypotheses]
