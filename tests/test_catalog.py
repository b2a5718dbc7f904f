"""The message catalog: a reproducible build from source fixtures, lookup of unrecognized lines,
the located hypotheses in the report, version insight, the layer table and the shipped data."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from triage import catalog as catalog_pkg
from triage.api import CATALOG_FRAME, Engine, KnowledgeBase
from triage.catalog import LAYER_RULES, open_catalog
from triage.catalog.store import DATA_FILE

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "catalog"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_message_catalog", ROOT / "scripts" / "build_message_catalog.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("catalog") / "catalog.sqlite"
    script = _script()
    assert script.main(["--fixtures", str(FIXTURES), "--out", str(out)]) == 0
    return out


@pytest.fixture
def fixture_catalog(built: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("TRIAGE_CATALOG", str(built))
    yield built


def test_build_is_byte_for_byte_reproducible(built: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.sqlite"
    assert _script().main(["--fixtures", str(FIXTURES), "--out", str(again)]) == 0
    assert again.read_bytes() == built.read_bytes()


def test_templates_turn_placeholders_into_wildcards(built: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(built)
    rows = {
        t: (p, f, fn, k)
        for t, p, f, fn, k in conn.execute(
            "SELECT m.template, s.project, p.file, s.function, s.kind "
            "FROM message m JOIN site s ON s.message = m.id JOIN path p ON p.id = s.path"
        )
    }
    # an f-string and a .format() wording of one message, in two releases
    kv = (
        "To serve at least one request with the models's max seq len (<*>), (<*> GiB KV cache is "
        "needed, which is larger than the available KV cache memory (<*> GiB)."
    )
    assert rows[kv] == (
        "vllm",
        "vllm/v1/core/kv_cache_utils.py",
        "check_enough_kv_cache_memory",
        "ValueError",
    )
    # logging's %-arguments, a %-formatted variable raised later, an assert message
    assert rows["Hybrid KV cache manager: <*> groups, page size <*>"][3] == "logger.warning"
    assert rows["Hybrid KV cache manager is disabled for <*> layers"][2:] == (
        "KVCacheSpecUnifier.unify",
        "NotImplementedError",
    )
    assert rows["too many KV cache groups to unify: <*>"][3] == "AssertionError"
    # C: NCCL WARN in a function and inside a namespace; TORCH_CHECK's concatenated arguments;
    # a message built with + inside a macro
    assert rows["socketProgress: Connection closed by remote peer <*>"][2:] == (
        "socketProgress",
        "NCCL WARN",
    )
    assert rows["ncclSocketConnect: socket is invalid"][2] == "ncclSocketConnect"
    assert rows["expandable_segments not supported on this platform (size was <*> bytes)"][2:] == (
        "parseArgs",
        "TORCH_CHECK",
    )
    assert rows["NCCL error in: <*>:<*>, <*>"][2] == "C10_CHECK_NCCL"
    # Go and Rust
    assert rows["error constructing low-level runtime: <*>"][2:] == ("rt.Run", "error")
    assert rows["Ignoring runtime mode <*>: not supported in this release"][3] == "log warning"
    assert (
        rows["Unable to load the tokenizer from file <*>: not a tokenizer.json"][0] == "tokenizers"
    )
    assert rows["Error while attempting to build the tokenizer from <*>"][3] == "PyException"
    # a project's own log calls: Slurm's error(), pyxis' slurm_error(), NIXL's streamed macro,
    # the C++ runtime's fputs; a Go error type's Error() method; `p->ops.error(...)` is no call
    # of Slurm's log, nor a Go return outside an Error method a message
    assert rows["spank: required plugin <*>: <*>() failed with rc=<*>"] == (
        "slurm",
        "src/common/spank.c",
        "run_plugin_stack",
        "error()",
    )
    assert rows["pyxis: child <*> failed with error code: <*>"][3] == "slurm_error"
    # an #ifdef/#else whose branches each open a brace does not shift the functions after it
    assert rows["spank: plugin stack of <*> went away"][2] == "after_the_branches"
    assert rows["UCX endpoint create failed: <*>"][2:] == ("Worker::connect", "NIXL_ERROR")
    assert rows["terminate called after throwing an instance of '"][3] == "fputs(stderr)"
    assert rows["something went wrong, please see the ollama server logs for details"][2:] == (
        "ServerFailure.Error",
        "error",
    )
    assert "not a log call of this project at all" not in rows
    assert "a return outside an Error method is not a message" not in rows
    # the data holds message texts and locations, never code
    assert not any("raise " in t or "WARN(" in t for t in rows)


def test_lookup_picks_the_most_specific_template(fixture_catalog: Path) -> None:
    cat = open_catalog(fixture_catalog)
    assert cat is not None
    short = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    longer = (
        short
        + " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    )
    a = cat.locate_text(short)
    b = cat.locate_text(longer)
    assert a is not None and b is not None
    assert a.source.releases == "0.10.0" and b.source.releases == "0.11.2"  # one wording each
    assert b.source.url == (
        "https://github.com/vllm-project/vllm/blob/v0.11.2/vllm/v1/core/kv_cache_utils.py#L10"
    )
    assert cat.locate_text("ValueError: No available memory") is None  # too little literal text
    assert cat.locate_text("RuntimeError: something nobody ever wrote down") is None


def test_version_insight(fixture_catalog: Path) -> None:
    cat = open_catalog(fixture_catalog)
    assert cat is not None
    line = (
        "The checkpoint you are trying to load has model type `qwen9` but Transformers does "
        "not recognize this architecture."
    )
    old = cat.locate_text(line, {"vllm_version": "0.10.0"})
    new = cat.locate_text(line, {"vllm_version": "0.11.2"})
    assert old is not None and new is not None
    assert (
        old.source.version_note
        and "0.10.0 (the log's version) does not print" in old.source.version_note
    )
    assert new.source.version_note is None and new.source.release == "0.11.2"
    assert new.layer == "model"  # vllm/transformers_utils: a check about the checkpoint


def _report(engine: Engine, tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "x.log"
    log.write_text(text)
    return engine.run([str(log)]).to_json_dict()


def test_located_hypotheses_in_the_report(
    engine: Engine, fixture_catalog: Path, tmp_path: Path
) -> None:
    text = (
        "INFO 10-25 13:08:40 [api_server.py:1] vLLM API server version 0.10.0\n"
        "host-1:123:456 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by "
        "remote peer host-2<41109>\n"
        "RuntimeError: a failure no source in the fixtures prints\n"
        # A decisive cause elsewhere in the log: without one, the NCCL WARN line would be the
        # supporting tell of an inferred NCCL cause (docs/ranking.md) and never reach the catalog.
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.\n"
    )
    report = _report(engine, tmp_path, text)
    hyps = report["hypotheses"]
    assert isinstance(hyps, list)
    located = [h for h in hyps if h["basis"] == "located"]
    assert len(located) == 1
    hyp = located[0]
    assert hyp["layer"] == "node" and hyp["severity"] == "error" and hyp["score"] == 0.0
    assert (
        hyp["source"]["file"] == "src/misc/socket.cc"
        and hyp["source"]["function"] == "socketProgress"
    )
    assert hyp["summary"].startswith("raised by nccl 2.21.5, src/misc/socket.cc, socketProgress")
    assert hyp["evidence"][0]["line"] == 2
    assert all(h["basis"] != "located" for h in hyps[: hyps.index(hyp)])  # below curated ones
    unrec = report["unrecognized"]
    assert isinstance(unrec, list) and [u["line"] for u in unrec] == [3]


def test_bare_assertion_located_by_its_traceback(
    engine: Engine, fixture_catalog: Path, tmp_path: Path
) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 26, in unify\n'
        "    assert len(specs) < 64\n"
        "AssertionError\n"
    )
    report = _report(engine, tmp_path, text)
    all_hyps = report["hypotheses"]
    assert isinstance(all_hyps, list)
    hyps = [h for h in all_hyps if h["basis"] == "located"]
    assert len(hyps) == 1 and not report["unrecognized"]
    src = hyps[0]["source"]
    assert (src["file"], src["function"], src["line"]) == (
        "vllm/v1/core/kv_cache_utils.py",
        "unify",
        26,
    )
    # the file is in both releases, the function only in 0.10.0 (the function index)
    assert src["kind"] == "AssertionError (traceback frame)" and src["releases"] == "0.10.0"


def test_cut_traceback_located_by_its_innermost_frame(
    fixture_catalog: Path, tmp_path: Path
) -> None:
    """A traceback cut before its exception line is located by the last frame that follows its
    first line (where it was when the text stopped); the near miss: a cut traceback after a
    failure a curated signature diagnosed is that failure's tail, not a finding of its own."""
    engine = Engine(KnowledgeBase([]))
    frames = (
        '  File "/usr/lib/python3.12/site-packages/vllm/engine/llm_engine.py", line 3, in step\n'
        "    out = self.scheduler.schedule()\n"
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 26, in unify\n'
        "    assert len(specs) < 64\n"
    )
    report = engine.run([str(_write(tmp_path, "Traceback (most recent call last):\n" + frames))])
    located = [h for h in report.hypotheses if h.basis == "located"]
    assert len(located) == 1 and not report.unrecognized
    src = located[0].source
    assert src is not None
    assert (src.file, src.function) == ("vllm/v1/core/kv_cache_utils.py", "unify")
    assert src.kind == "traceback cut (innermost frame)"
    assert located[0].evidence[0].line == 1


def test_top_of_a_cut_traceback_located_by_the_frames_below_it(
    fixture_catalog: Path, tmp_path: Path
) -> None:
    """A source line (or its ^^^^ markers) at the very top of a cut traceback has no frame above
    it: the traceback below it is located by its innermost frame in a catalogued file (a user's
    script below that is skipped). Near miss: a source line with no frame below stays
    unrecognized."""
    engine = Engine(KnowledgeBase([]))
    head = "ERROR 01-02 03:04:05 [core.py:9]     groups = plan(self.config, specs)\n"
    body = (
        'ERROR 01-02 03:04:05 [core.py:9]   File "/usr/lib/python3.12/site-packages/vllm/v1/core/'
        'kv_cache_utils.py", line 26, in unify\n'
        "ERROR 01-02 03:04:05 [core.py:9]     run_user_hook(specs)\n"
        'ERROR 01-02 03:04:05 [core.py:9]   File "/home/me/hooks.py", line 3, in run_user_hook\n'
        "ERROR 01-02 03:04:05 [core.py:9]     raise SystemExit(3)\n"
    )
    report = engine.run([str(_write(tmp_path, head + body))])
    located = [h for h in report.hypotheses if h.basis == "located"]
    assert located and located[0].evidence[0].line == 1
    src = located[0].source
    assert src is not None
    assert (src.file, src.function, src.kind) == (
        "vllm/v1/core/kv_cache_utils.py",
        "unify",
        "traceback cut (innermost frame)",
    )
    assert src.releases == "0.10.0"  # the function index: only 0.10.0 defines unify
    alone = engine.run([str(_write(tmp_path, head))])
    assert all(h.basis != "located" for h in alone.hypotheses)


def test_ipython_frames_and_src_layout_paths(fixture_catalog: Path, tmp_path: Path) -> None:
    """IPython's frame line (`File /path/x.py:12, in f(args)`) is a frame too, far below its
    `Traceback (most recent call last)` head; a frame whose function the file defines in no
    catalogued release is not located; a repository's prefix that the installed path lacks is found
    (CPython's Lib/ here; transformers' and openai's src/ the same way)."""
    engine = Engine(KnowledgeBase([]))
    text = (
        "SomeError                                 Traceback (most recent call last)\n"
        "Cell In[3], line 2\n"
        "      1 import vllm\n"
        "----> 2 run()\n"
        "\n"
        "File /opt/conda/lib/python3.11/site-packages/vllm/v1/core/kv_cache_utils.py:40, in "
        "gone_helper(x)\n"
        "     38 def gone_helper(x):\n"
        "---> 40     return x()\n"
    )
    report = engine.run([str(_write(tmp_path, text.replace("gone_helper", "unify")))])
    located = [h for h in report.hypotheses if h.basis == "located"]
    assert located and located[0].source is not None
    src = located[0].source
    assert (src.file, src.function, src.releases) == (
        "vllm/v1/core/kv_cache_utils.py",
        "unify",
        "0.10.0",
    )
    # near miss: no catalogued release of the file defines gone_helper: nothing to cite
    report = engine.run([str(_write(tmp_path, text))])
    assert all(h.basis != "located" for h in report.hypotheses) and report.unrecognized
    cat = open_catalog(fixture_catalog)
    assert cat is not None
    found = cat.store.files_ending(["importlib/_bootstrap.py"])  # CPython's Lib/
    assert found is not None and found[1] == "Lib/importlib/_bootstrap.py"


def test_near_miss_cut_traceback_after_a_diagnosis_is_its_tail(
    engine: Engine, tmp_path: Path
) -> None:
    oom = (ROOT / "corpus" / "engine" / "cuda-seed-e24-oom-load-draft-model.log").read_text()
    cut = 'Traceback (most recent call last):\n  File "/x/y.py", line 3, in f\n'
    report = engine.run([str(_write(tmp_path, oom + cut))])
    assert report.hypotheses[0].signature == "cuda-oom-loading-draft-model"
    assert not report.unrecognized
    assert all(h.basis != "located" for h in report.hypotheses)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "log.txt"
    path.write_text(text)
    return path


def test_text_and_markdown_show_the_source_in_one_line(
    engine: Engine, fixture_catalog: Path, tmp_path: Path
) -> None:
    from triage.render.markdown import render_markdown
    from triage.render.text import render_text

    log = tmp_path / "x.log"
    log.write_text("NotImplementedError: Hybrid KV cache manager is disabled for 3 layers\n")
    report = engine.run([str(log)])
    want = "raised by vllm 0.10.0, vllm/v1/core/kv_cache_utils.py, KVCacheSpecUnifier.unify"
    assert want in render_text(report)
    assert want in render_markdown(report)


def test_catalog_is_not_opened_for_a_healthy_run(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[object] = []
    monkeypatch.setattr(catalog_pkg, "open_catalog", lambda *a: opened.append(a))
    _report(engine, tmp_path, "INFO 10-25 13:08:43 [metrics.py:455] Avg prompt throughput: 0.0\n")
    assert not opened


def test_frame_pattern_is_the_catalogs(kb: KnowledgeBase) -> None:
    from triage.catalog.frames import FRAME_PATTERN

    assert CATALOG_FRAME[1] == FRAME_PATTERN


def test_layer_table_is_documented() -> None:
    doc = (ROOT / "docs" / "catalog.md").read_text()
    rows = re.findall(r"^\| `([\w.+-]+)` \| (`[^`]*`|any) \| (\w+) \| (.+?) \|$", doc, re.M)
    documented = [
        (p, "" if rx == "any" else rx.strip("`").replace("\\|", "|"), layer, why)
        for p, rx, layer, why in rows
    ]
    assert documented == [(p, rx, layer, why) for p, rx, layer, why in LAYER_RULES]


@pytest.mark.skipif(not DATA_FILE.is_file(), reason="the shipped catalog is built by scripts/")
def test_shipped_catalog_size_and_breadth() -> None:
    cat = open_catalog(DATA_FILE)
    assert cat is not None
    assert cat.templates() >= 20_000
    assert DATA_FILE.stat().st_size <= 15 << 20
    releases = {p: len(cat.releases(p)) for p in ("vllm", "sglang", "nccl", "torch")}
    assert releases["vllm"] >= 8 and releases["sglang"] >= 4, releases


class _Pattern:
    def __init__(self, regex: str) -> None:
        self.regex = regex


class _Sig:
    def __init__(self, sig_id: str, *regexes: str) -> None:
        self.id = sig_id
        self.decisive = [_Pattern(r) for r in regexes]


NO_MEMORY_0_11 = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


def test_version_sweep_reports_a_release_whose_wording_the_pattern_misses(
    fixture_catalog: Path,
) -> None:
    cat = open_catalog(fixture_catalog)
    assert cat is not None
    narrow = _Sig("narrow", r"initializing the engine\. See https://docs\.vllm\.ai")
    misses = cat.sweep(narrow, [NO_MEMORY_0_11])
    assert [(m.releases, m.function) for m in misses] == [
        ("0.10.0", "check_enough_kv_cache_memory")
    ]
    assert "no decisive pattern matches" in str(misses[0])
    wide = _Sig("wide", r"No available memory for the cache blocks")
    assert cat.sweep(wide, [NO_MEMORY_0_11]) == []


def test_draft_proposal_from_the_catalog(fixture_catalog: Path) -> None:
    from triage.regexes import compile_linear

    cat = open_catalog(fixture_catalog)
    assert cat is not None
    line = "host:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer h<1>"
    prop = cat.proposal(line)
    assert prop is not None
    assert compile_linear(prop.pattern).search(line) is not None
    assert prop.references == [
        "https://github.com/NVIDIA/nccl/blob/v2.21.5-1/src/misc/socket.cc#L7"
    ]
    assert (prop.project, prop.first, prop.last, prop.newest) == ("nccl", "2.21.5", "2.21.5", True)


def test_new_sources_and_shapes(built: Path) -> None:
    """systemd's unit messages, CPython's own exceptions (the class an argument, a module
    constant in an f-string), PyTorch's C++ error strings and ostringstream throws, the driver's
    level kept in the call kind."""
    import sqlite3

    conn = sqlite3.connect(built)
    rows = {
        (t, fn): (p, f, k)
        for t, p, f, fn, k in conn.execute(
            "SELECT m.template, s.project, p.file, s.function, s.kind "
            "FROM message m JOIN site s ON s.message = m.id JOIN path p ON p.id = s.path"
        )
    }
    exited = ("<*>: <*> exited, code=<*>, status=<*>/<*>", "unit_log_process_exit")
    assert rows[exited] == ("systemd", "src/core/unit.c", "LOG_UNIT_MESSAGE")
    assert rows[("Start request repeated too quickly.", "unit_start_limit")][2] == "log_error"
    assert not any("Start limit not reached" in t for t, _ in rows)  # debug level: left out
    compare = ("'<*>' not supported between instances of '<*>' and '<*>'", "do_richcompare")
    assert rows[compare] == ("cpython", "Objects/object.c", "TypeError")
    assert rows[("No module named <*>", "_find_and_load_unlocked")] == (
        "cpython",
        "Lib/importlib/_bootstrap.py",
        "ModuleNotFoundError",
    )
    internal = ("ncclInternalError: Internal check failed.", "getNcclErrorDetailStr")
    assert rows[internal] == (
        "torch-cpp",
        "torch/csrc/distributed/c10d/NCCLUtils.cpp",
        "error string",
    )
    shape = ("shape '<*>' is invalid for input of size <*>", "infer_size_check")
    assert rows[shape] == ("torch-cpp", "aten/src/ATen/InferSize.cpp", "std::runtime_error")
    probe = ("NVRM: The NVIDIA probe routine failed for <*> device(s).", "nvidia_init_module")
    assert rows[probe][2] == "nv_printf(NV_DBG_ERRORS)"
    assert not any("nothing to see here" in t for t, _ in rows)  # NV_DBG_INFO: left out


def test_unleveled_calls_get_a_level_from_text_or_are_warnings_at_most() -> None:
    from triage.catalog import severity_of

    # a level the call names
    assert (
        severity_of("nv_printf(NV_DBG_ERRORS)", "NVRM: The NVIDIA probe routine failed") == "error"
    )
    assert severity_of("nv_printf(NV_DBG_WARNINGS)", "NVRM: anything failed") == "warning"
    assert severity_of("NV_PRINTF(LEVEL_ERROR)", "Possible bad register read") == "error"
    # no level: the template's own words decide (a failure word: error) ...
    probe = "NVRM: The NVIDIA probe routine failed for <*> device(s)."
    assert severity_of("nv_printf", probe) == "error"
    rate = "NVRM: Rate limiting GSP RPC error prints for GPU at PCI:<*>"
    assert severity_of("portDbgPrintf", rate) == "error"
    # ... never a value the log filled in (systemd's "status=1/FAILURE"): a warning at most
    exited = "<*>: <*> exited, code=<*>, status=<*>/<*>"
    assert severity_of("LOG_UNIT_MESSAGE", exited) == "warning"
    assert severity_of("nv_printf", "NVRM: loading NVIDIA UNIX Open Kernel Module <*>") == "warning"
    # ... unless the log line carries its own level (a journal record at priority err)
    assert severity_of("LOG_UNIT_MESSAGE", exited, "err") == "error"
    # exceptions, checks and NCCL's WARN (its failure report) stay errors; warnings stay warnings
    assert severity_of("ValueError") == severity_of("TORCH_CHECK") == "error"
    assert severity_of("NCCL WARN") == "error"
    assert severity_of("logger.warning") == severity_of("log_notice") == "warning"


def test_unleveled_real_lines_in_the_report(fixture_catalog: Path, tmp_path: Path) -> None:
    # an empty knowledge base, so the catalog speaks for every line (curated signatures know the
    # probe failure since the node-os pack)
    engine = Engine(KnowledgeBase([]))
    text = (  # real lines (corpus/node/): the probe failure, the GSP rate limit, a unit's exit
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
        "[Sun Feb 23 16:24:36 2025] NVRM: Rate limiting GSP RPC error prints for GPU at "
        "PCI:0000:9b:00 (printing 1 of every 30).  The GPU likely needs to be reset.\n"
        "Dec 02 17:26:51 node-1 systemd[1]: systemd-networkd-wait-online.service: Main process "
        "exited, code=exited, status=1/FAILURE\n"
    )
    report = _report(engine, tmp_path, text)
    hyps = report["hypotheses"]
    assert isinstance(hyps, list)
    by_line = {h["evidence"][0]["line"]: h for h in hyps if h["basis"] == "located"}
    assert by_line[1]["severity"] == "error" and by_line[1]["layer"] == "node"
    assert by_line[2]["severity"] == "error"
    assert by_line[2]["source"]["kind"] == "portDbgPrintf"
    # the unit's exit, located in systemd's LOG_UNIT_MESSAGE: never an error from its values
    assert by_line[3]["severity"] == "warning"
    assert by_line[3]["source"]["project"] == "systemd"


def test_traceback_lines_located_by_their_frame(
    engine: Engine, fixture_catalog: Path, tmp_path: Path
) -> None:
    """A cut traceback's first lines: a frame line by its own frame, a source line by the frame
    above it, a `raise X(` line by the exception line of class X below it; an indented line with
    no frame near it stays unrecognized."""
    from triage.catalog import open_catalog
    from triage.models import Line

    cat = open_catalog(fixture_catalog)
    assert cat is not None
    frame = (
        'File "/opt/venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", '
        "line 26, in unify"
    )
    frames = [("x.log|EngineCore", 1, frame)]
    own = Line(
        "x.log",
        1,
        "ERROR [core.py:1]   " + frame,
        "ERROR [core.py:1]   " + frame,
        frame,
        process="EngineCore",
    )
    found = cat.locate_traceback_line(own, frames, [], {})
    assert found is not None
    assert (found.source.file, found.source.function, found.source.kind) == (
        "vllm/v1/core/kv_cache_utils.py",
        "unify",
        "traceback frame",
    )
    code = "ERROR [core.py:1]     assert len(specs) < 64"
    src_line = Line("x.log", 2, code, code, "assert len(specs) < 64", process="EngineCore")
    found = cat.locate_traceback_line(src_line, frames, [], {})
    assert found is not None and found.source.kind == "traceback source line"
    assert found.source.function == "unify"
    far = Line("x.log", 9, code, code, "assert len(specs) < 64", process="EngineCore")
    assert cat.locate_traceback_line(far, frames, [], {}) is None  # no frame just above it
    raised = "ERROR [core.py:1]     raise NotImplementedError("
    raise_line = Line("x.log", 1, raised, raised, "raise NotImplementedError(", process="P")
    exc = "NotImplementedError: Hybrid KV cache manager is disabled for 3 layers"
    found = cat.locate_traceback_line(raise_line, [], [("x.log|P", 2, exc)], {})
    assert found is not None and found.source.function == "KVCacheSpecUnifier.unify"
    other = "ValueError: Hybrid KV cache manager is disabled for 3 layers"
    assert cat.locate_traceback_line(raise_line, [], [("x.log|P", 2, other)], {}) is None


def test_runtime_messages_are_located_in_the_runtime_only(fixture_catalog: Path) -> None:
    from triage.catalog import open_catalog

    cat = open_catalog(fixture_catalog)
    assert cat is not None
    real = "TypeError: '>' not supported between instances of 'NoneType' and 'int'"
    found = cat.locate_text(real)
    assert found is not None
    assert (found.source.project, found.source.function) == ("cpython", "do_richcompare")
    found = cat.locate_text("- ModuleNotFoundError: No module named 'common_ops'")
    assert found is not None and found.source.file == "Lib/importlib/_bootstrap.py"
    # the message is a header's string macro (NAME_ERROR_MSG), put in place by the build
    found = cat.locate_text("NameError: name 'LLM' is not defined. Did you mean: 'VLLM'?")
    assert found is not None and found.source.file == "Python/ceval.c"
    # two functions of the file print it and the line cannot tell which: both are named
    assert found.source.function == "load_global, load_name"
    # a near miss: the runtime's wording inside a library's own message is not the runtime's
    assert cat.locate_text("ValueError: name 'LLM' is not defined in the registry") is None
