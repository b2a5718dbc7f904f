"""Ranking: causes before symptoms, node before engine, first fatal first, explanations listed."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT
from tests.helpers import run_text
from triage.api import Engine

CASCADE = """\
(EngineCore_DP0 pid=270) ERROR 10-25 13:08:43 [core.py:708] EngineCore failed to start.
(EngineCore_DP0 pid=270) ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
(APIServer pid=1) ERROR 07-23 06:51:50 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


def test_cause_first_and_cascade_explained(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, CASCADE, tmp_path)
    assert [h.signature for h in report.hypotheses] == ["kv-cache-no-memory"]
    explained = {e.signature: e.lines for e in report.hypotheses[0].explains}
    assert explained["engine-core-init-failed"] == [1, 3]
    assert explained["engine-dead-error"] == [4]


def test_symptom_alone_is_reported_not_silent(engine: Engine, tmp_path: Path) -> None:
    report = run_text(
        engine,
        "(EngineCore_DP0 pid=1) ERROR 12-04 11:46:32 [core.py:843] EngineCore failed to start.\n",
        tmp_path,
    )
    assert report.hypotheses[0].signature == "engine-core-init-failed"
    assert report.failed


def test_unrecognized_exception_is_reported(engine: Engine, tmp_path: Path) -> None:
    text = (
        "(Worker_TP0 pid=77) Traceback (most recent call last):\n"
        '(Worker_TP0 pid=77)   File "/x/y.py", line 3, in f\n'
        "(Worker_TP0 pid=77) FrobnicationError: the widget 0x7f3a at /opt/a/b.py exploded after 42 tries\n"
    )
    report = run_text(engine, text, tmp_path)
    assert not report.hypotheses
    assert report.unrecognized[0].line == 3
    assert (
        "<HEX>" in report.unrecognized[0].fingerprint
        and "<N>" in report.unrecognized[0].fingerprint
    )
    assert report.failed


def test_scores_are_explainable(engine: Engine, tmp_path: Path) -> None:
    report = run_text(engine, CASCADE, tmp_path)
    terms = report.hypotheses[0].explain
    assert any("severity error" in t for t in terms)
    assert any("explains" in t for t in terms)


def test_out_of_range_version_lowers_never_hides(engine: Engine, tmp_path: Path) -> None:
    text = "vLLM API server version 0.1.0\n" + CASCADE.splitlines()[1] + "\n"
    report = run_text(engine, text, tmp_path)
    top = report.hypotheses[0]
    assert top.signature == "kv-cache-no-memory" and top.applicability
    assert any("lowered" in t for t in top.explain)


def test_differential_uses_facts(engine: Engine, tmp_path: Path) -> None:
    text = (
        "(APIServer pid=1) INFO 10-25 13:07:02 [utils.py:233] non-default args: {'model': 'x', 'data_parallel_size': 8, 'enable_expert_parallel': True}\n"
        + CASCADE
    )
    top = run_text(engine, text, tmp_path).hypotheses[0]
    assert top.fixes[0].likely and "TP + EP" in top.fixes[0].do


def test_crash_tail_after_a_diagnosis_is_not_a_new_failure(engine: Engine, tmp_path: Path) -> None:
    text = (
        "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        "Aborted (core dumped)\n"
        "vllm.service: Main process exited, code=dumped, status=6/ABRT\n"
    )
    report = run_text(engine, text, tmp_path)
    assert report.hypotheses[0].signature == "cuda-illegal-memory-access"
    assert not report.unrecognized, [u.text for u in report.unrecognized]


def test_crash_without_a_diagnosis_is_still_reported(engine: Engine, tmp_path: Path) -> None:
    text = "INFO starting\nterminate called after throwing an instance of 'std::bad_alloc'\n"
    report = run_text(engine, text, tmp_path)
    # reported: unrecognized, or located by the message catalog (libstdc++'s terminate handler is
    # catalogued since its third round), never silent
    located = [e.line for h in report.hypotheses if h.basis == "located" for e in h.evidence]
    assert located + [u.line for u in report.unrecognized] == [2]
    assert report.failed


DYNAMO_WRAPPING_OOM = """\
ERROR 10-25 13:08:43 [core.py:708]   File "/usr/lib/python3/dist-packages/torch/_dynamo/convert_frame.py", line 1164, in __call__
ERROR 10-25 13:08:43 [core.py:708] torch._dynamo.exc.TorchRuntimeError: Failed running call_function <built-in function linear>(*(FakeTensor(..., device='cuda:0', size=(8192, 4096)),), **{}):
ERROR 10-25 13:08:43 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.2 GiB is free.
ERROR 10-25 13:08:43 [core.py:708] Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch).
"""


def test_an_error_raised_inside_a_compiled_region_is_the_cause_not_dynamo(
    engine: Engine, tmp_path: Path
) -> None:
    """torch.compile wraps whatever failed while it traced; the wrapped OOM is the cause."""
    report = run_text(engine, DYNAMO_WRAPPING_OOM, tmp_path)
    assert report.hypotheses[0].signature == "cuda-out-of-memory"
    assert "dynamo-trace-failed" in {e.signature for e in report.hypotheses[0].explains}


def test_a_worker_killed_by_the_oom_killer_is_explained_by_it(
    engine: Engine, tmp_path: Path
) -> None:
    report = run_text(
        engine,
        "[Mon Nov 30 01:02:03 2026] Out of memory: Killed process 4121 (python3) "
        "total-vm:98765432kB, anon-rss:87654321kB, file-rss:0kB, shmem-rss:0kB, UID:0\n"
        "ERROR 11-30 01:02:04 [multiproc_executor.py:140] Worker proc VllmWorker-1 died "
        "unexpectedly, shutting down executor.\n",
        tmp_path,
    )
    assert [h.signature for h in report.hypotheses] == ["host-oom-killer"]
    assert {e.signature for e in report.hypotheses[0].explains} == {"vllm-worker-proc-died"}


def test_matched_lines_counts_beyond_the_kept_evidence(tmp_path: Path) -> None:
    """A decisive line repeated past the matcher's cap is counted in `matched_lines` (the
    evidence stays a bounded sample) and the text says how many are not shown; a line that
    matches two decisive patterns of one signature counts once."""
    from triage.api import Engine, load_kb
    from triage.match import KEEP_HITS_PER_PATTERN
    from triage.render.text import render_text

    kb = load_kb()
    lines = (ROOT / "corpus" / "engine" / "cuda-seed-e24-oom-load-draft-model.log").read_text()
    oom = lines.splitlines()[2]  # torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
    repeats = KEEP_HITS_PER_PATTERN + 300
    path = tmp_path / "many.log"
    path.write_text("\n".join(f"{oom} rank {i}" for i in range(repeats)) + "\n")
    report = Engine(kb).run([str(path)])
    top = report.hypotheses[0]
    assert top.matched_lines == repeats
    assert sum(e.count for e in top.evidence if e.role == "decisive") < repeats
    assert f"{repeats - sum(e.count for e in top.evidence if e.role == 'decisive'):,} more" in (
        render_text(report, color=False)
    )
    # the near miss: a single line is all shown, nothing more is announced
    one = tmp_path / "one.log"
    one.write_text(oom + "\n")
    single = Engine(kb).run([str(one)])
    assert single.hypotheses[0].matched_lines == 1
    assert "more matching" not in render_text(single, color=False)
