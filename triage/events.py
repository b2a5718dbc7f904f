"""Group confirmed hits into events: evidence per signature (identical lines from many ranks folded
into one with a count), Python tracebacks per process, and salient lines nothing explains.

Salient lines (exceptions, fatal errors, kernel faults, non-zero exits) come from `SALIENT_PATTERNS`,
found by the same single scan as the signatures. A salient line is explained when a signature fired
on it, on the exception line of its traceback, or on a line with the same fingerprint.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from triage.models import Hit, Line
from triage.textutil import mask

# The first line of a Python traceback (its pattern below is the `traceback` class); a traceback
# cut before its exception line is reported and located by this line.
TRACEBACK_HEAD = "Traceback (most recent call last)"

SALIENT_PATTERNS: tuple[tuple[str, str], ...] = (
    # keep-sorted start
    # container runtime and Kubernetes failure states
    (
        "container",
        r"(?:Error response from daemon|nvidia-container-cli: .{0,120}\berror\b|OCI runtime (?:create|exec) failed|\bOOMKilled\b|CrashLoopBackOff|Back-off restarting failed container|\bErrImagePull\b|\bImagePullBackOff\b"
        r"|\b[0-9]+/[0-9]+ nodes are available: [0-9]|\b(?:Liveness|Readiness|Startup) probe failed\b|Unable to attach or mount volumes|The node was low on resource: |\bUnexpectedAdmissionError\b"
        r"|\bWarning +(?:Failed|FailedMount|FailedAttachVolume|FailedCreatePodSandBox|FailedScheduling|Unhealthy|BackOff) +[0-9])",
    ),
    # a failed permission check, as tools print it ("bash: ./x: Permission denied", "[Errno 13] ...")
    ("denied", r"(?::|\]) [Pp]ermission denied\b|\bavc: +denied +\{|apparmor=\"DENIED\""),
    # a command-line tool's own error line: "error: pyxis: couldn't mkdir ...", "Error: stat
    # nvidia.com/gpu=0: ...", "[ERROR] [sol_attn] kernel failed"; a worker that reports its
    # exception in one line before the traceback ("TpModelWorkerClient hit an exception:")
    (
        "error-line",
        r"(?:(?:^|[>`]|[\])] |: )(?:error|Error): [A-Za-z_\[(/*]|\bCUDA error: [a-z]|\[(?:ERROR|FATAL)\] |\[error\]|\bhit an exception: |^Error in child process:"
        r"|^[\w./-]{2,40}: (?:ERROR|FATAL|fatal): [A-Za-z]|\bfatal error: [\w\[<\"'./-]|(?:^|[\s>`|])Error! [A-Z]|\bValue error, [A-Z]|^ERROR: [A-Z][a-z]|\bptxas\b.{0,200}\b(?:error|fatal) +: |\*\*\* An error occurred in [A-Z]|\b\d\d:\d\d:\d\d Error: [a-z]|^Invalid argument: -{1,2}[a-z])",
    ),
    # a system call's failure in its errno words, after the path or call it names ("write
    # /dev/shm/x: no space left on device", Go's "lstat /dev/nvidia-uvm: no such file or directory",
    # "exec /bin/ollama: exec format error"), Node.js's "connect ECONNREFUSED 127.0.0.1:8080",
    # nginx's "upstream timed out (110: Operation timed out) while reading upstream"
    (
        "errno",
        r"(?:: (?:[Nn]o space left on device|[Rr]ead-only file system|[Dd]isk quota exceeded|[Tt]oo many open files|[Oo]peration not permitted)\b"
        r"|\b(?:lstat|stat|open|mkdir|write|read|unlinkat|rename|mount|exec) /[^\s:]{1,200}: (?:no such file or directory|device or resource busy)\b"
        r"|\bexec /[^\s:]{1,200}: exec format error\b|\bconnect (?:ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH) [0-9a-f.:\[\]]+"
        r"|\bgetaddrinfo (?:ENOTFOUND|EAI_AGAIN) [\w.-]+|\((?:104|110|111|113): [A-Za-z ]{5,40}\) while (?:reading|connecting to|sending to|reading response header from) upstream)",
    ),
    # a failure stated in words: a call that failed ("ibv_create_cq() failed: Cannot allocate
    # memory", "cudaMalloc failed: out of memory", "fi_mr_reg failed, ret is:-12"), "Failed to
    # initialize NVML: ..." at the start of a line or after a tool's prefix, a tool's "error loading
    # model:", a named CUDA/HIP runtime error code, an HTTP error status a client reports
    (
        "failed",
        r"(?:(?:\b[A-Za-z_][\w.:]{1,60}\([^()\n]{0,300}\)|\b[a-z][a-z0-9]*_\w{1,60}|\b[a-z]{2,20}[A-Z]\w{1,40})"
        r" failed(?:: |, | with (?:error|code|status)|\s*\((?:-?[0-9]|err))"
        r"|(?:^(?:[^\w\s]{1,8} )?|[>`|\]]\s?|: )[Ff]ailed to [a-z]{3,20} [^\n]{0,200}?(?:: [A-Za-z(\[]|within [0-9])"
        r"|\b[Uu]nable to (?:determine the|load|open|find|initialize|allocate|create|connect|mount|start|get|read|configure) [^\n]{0,200}?: [A-Za-z]"
        r"|\bfail(?:ed)? to call [A-Za-z_]\w{2,60}\(|\[(?:HIP|CUDA) error\]\(\w"
        r"|\b[a-z][A-Za-z0-9_]{2,30} error: [A-Z]|\b[a-z]{2,20} initiali[sz]ation failed\b|\.\.\. ?FAILED\b"
        r"|^(?:[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9:]{8} )?Could not (?:load|open|find|resolve|unload|initialize|allocate|create|connect|mount|start|read|determine|get|insert|register) "
        r"|\bHSA_STATUS_ERROR_[A-Z_]+|\baborting with error\b"
        r"|\bsize mismatch for [\w.]+: copying a param|\bWatchdog timeout \("
        r"|\bCUDA error [0-9]+ at [^\s:]{1,300}:[0-9]+|\bcuda[A-Z]\w{2,40} returned [1-9][0-9]*"
        r"|\bCUDA_ERROR_[A-Z_]{3,40}\b|\bNVIDIA-SMI (?:has failed|couldn't)|\bError loading (?:model|weights|checkpoint)"
        r"|\b[a-z_]{3,40}: error (?:loading|reading|opening|creating|allocating|initializing) [a-z]"
        r"|\b(?:cuda|hip)Error[A-Z][A-Za-z]{4,40}\b|\bcuda runtime error \([0-9]+\)"
        r"|\b(?:Error code|status code|API error|HTTP error|HTTP|Error)[: ]{1,3}[45][0-9][0-9]\b"
        r"|\b[45][0-9][0-9] (?:Internal Server Error|Bad Request|Service Unavailable|Bad Gateway|Gateway Time-?out|Unprocessable Entity)\b"
        r"|\"type\": ?\"error\", ?\"message\": ?\"|\b(?:module|library|driver|device) initiali[sz]e failed\b"
        r"|\"error\": ?\{\"code\": ?[45][0-9][0-9]|\"code\": ?[45][0-9][0-9], ?\"message\""
        r"|[\"']object[\"']: ?[\"']error[\"'], ?[\"']message[\"']|\"status\": ?[45][0-9][0-9], ?\"error\""
        r"|\b(?:[A-Z][a-z]{2,20}|[a-z]{3,20}) failed to start\b|^[a-z_]{3,40}: [^\n]{0,80}\bis no longer supported\b"
        r"|(?:^|: |\b[0-9]{3} )Fail to [a-z]{3,20} [^\n]{0,200}?[(:.])",
    ),
    # a Python exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...", bare "KeyError"
    ("exception", r"\b[A-Za-z_][\w.]*(?:Error|Exception)(?::|\r|$)"),
    # process exits reported by supervisors (systemd, docker, kubelet, Slurm)
    (
        "exit",
        r"(?:Main process exited, code=(?:exited|killed|dumped)|exited with (?:exit )?code [1-9]|Exit Code: *[1-9]|status=[1-9][0-9]*/[A-Z]|\bexited on signal [0-9]+|one or more processes exited with non-zero status)",
    ),
    # fatal process deaths; a C/C++ assert() as glibc prints it ("prog: file.cpp:40: func:
    # Assertion `expr' failed."), the line that names what a core dump aborted on (libstdc++'s
    # "what():", macOS libc++abi's "terminating due to uncaught exception"); a Go panic's
    # first line ("panic: runtime error: index out of range [0] with length 0")
    (
        "fatal",
        r"(?:Fatal Python error|Segmentation fault|core dumped|terminate called after throwing|\bFATAL\b|\*\*\* SIG[A-Z]+ |\.(?:c|cc|cpp|cxx|cu|h|hpp):[0-9]+: [^\n]{1,400}: Assertion `"
        r"|thread: \[[0-9]+,[0-9]+,[0-9]+\] Assertion `|^\s*what\(\): {1,2}\S|libc\+\+abi: terminating due to uncaught exception|\bLLVM ERROR: [A-Z]"
        r"|^panic: [^\s\d]|^SIG(?:SEGV|ABRT|BUS|ILL|FPE|TRAP|QUIT): [a-z]|\bpanic: runtime error: [a-z]|called `(?:Result|Option)::unwrap\(\)` on an? `(?:Err|None)` value|\bthread '[^'\n]{1,80}' panicked at |Memory access fault by GPU node-[0-9]|\b[A-Z][A-Z0-9]{1,20}_ASSERT\([^\n]{1,300}\) failed)",
    ),
    # kernel faults and GPU driver events
    (
        "kernel",
        r"(?:NVRM: Xid|BUG: |general protection fault|Kernel panic|Out of memory: Killed process|blocked for more than [0-9]+ seconds|DMAR: \[DMA|IO_PAGE_FAULT|mce: \[Hardware Error\]|has fallen off the bus|AER: (?:Multiple )?Uncorrected \((?:Fatal|Non-Fatal)\) error received|\bSXid \(PCI:)",
    ),
    # kernel errors: filesystems and block devices, the cgroup OOM killer, segfaults, NVRM failures
    (
        "kernel-error",
        r"(?:EXT4-fs error|EXT4-fs \([\w-]+\): .{0,60}\berror\b|XFS \([\w-]+\): (?:metadata I/O error|Corruption)|Buffer I/O error|I/O error, dev |Memory cgroup out of memory|\boom-kill:|segfault at [0-9a-f]+ ip |NVRM: .{0,160}\b(?:failed|Failed|error|ERROR)\b|NVRM: API mismatch: |: version magic '[^'\n]{1,120}' should be '|amdgpu [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9]: .{0,80}\b(?:timeout|page fault|failed|error)\b|\[drm(?::\w+)?[^\]\n]{0,60}\] \*ERROR\* |\[drm ERROR :)",
    ),
    # error-level records of the loggers triage unwraps: vLLM, uvicorn, Python logging, Go/logrus,
    # glog/klog (PyTorch c10 too), bracketed [E] tags, "err: N" return codes, Rust's tracing
    # ("ERROR sglang_router_rs::core::worker: ...")
    (
        "logger",
        r"(?:\b(?:ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d|\b(?:ERROR|CRITICAL): {2,}\S| - (?:ERROR|CRITICAL) - |\blevel=(?:error|fatal|panic)\b|\b[EF]\d{3,4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [\w.-]+:\d+\]|\[E\] |\berr: -?[1-9][0-9]*\b|\bUCX {1,2}ERROR |\"level\": ?\"(?:error|fatal|panic)\"|\[E [\w.-]+\.(?:cpp|cc|cu|h):[0-9]+\]|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [EC] \d+ \d+\]|\d\s+ERROR [\w.-]+\.py:\d+ -- \S|\| (?:ERROR|CRITICAL) +\| |\] (?:ERROR|CRITICAL) {2,}\S|\bERROR [a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)+: \S)",
    ),
    # NCCL's own warnings
    ("nccl", r"NCCL WARN "),
    # systemd: a unit that failed to start or spawn (systemctl's "Job for x.service failed")
    (
        "service",
        r"(?:Failed at step [A-Z_]+ spawning|Failed to start [A-Za-z0-9]|: Failed with result '|Start request repeated too quickly|Job for [\w@.:-]{1,200}\.(?:service|socket|mount|target|timer) failed\b)",
    ),
    # the start of a Python traceback (groups the frames that follow)
    ("traceback", r"Traceback \(most recent call last\)"),
    # keep-sorted end
)

# Exception classes that are warnings or control flow, not failures.
_BENIGN_EXCEPTIONS = (
    "Warning:",
    "StopIteration",
    "KeyboardInterrupt",
    "CancelledError",
    "GeneratorExit",
)


def process_key(line: Line) -> str:
    """The stream a line belongs to: its process prefix, else its pid, else the input."""
    return f"{line.input}|{line.process or line.pid or '-'}"


@dataclass
class Traceback:
    """A Python traceback's lines grouped, with its exception line."""

    key: str
    input: str
    start: int
    end: int = 0
    exception: Line | None = None


@dataclass
class Evidence:
    """A salient line with its class."""

    line: Line
    role: str
    count: int = 1
    captures: dict[str, str] = field(default_factory=dict)


def fold_evidence(hits: Iterable[Hit]) -> list[Evidence]:
    """One Evidence per distinct masked text, in input order, counting repeats (many ranks)."""
    folded: dict[tuple[str, str], Evidence] = {}
    for hit in sorted(hits, key=lambda h: (h.line.input, h.line.number)):
        key = (hit.role, mask(hit.line.message or hit.line.text))
        if key in folded:
            ev = folded[key]
            if ev.line.number != hit.line.number or ev.line.input != hit.line.input:
                ev.count += hit.line.repeated
            continue
        folded[key] = Evidence(hit.line, hit.role, hit.line.repeated, dict(hit.captures))
    return list(folded.values())


def group_tracebacks(salient: Iterable[Hit]) -> list[Traceback]:
    """Tracebacks per process stream: from 'Traceback (most recent call last)' to its exception line."""
    open_tb: dict[str, Traceback] = {}
    done: list[Traceback] = []
    for hit in sorted(salient, key=lambda h: (h.line.input, h.line.number)):
        key = process_key(hit.line)
        if hit.signature == "traceback":
            if key in open_tb:
                done.append(open_tb.pop(key))
            open_tb[key] = Traceback(key, hit.line.input, hit.line.number, hit.line.number)
        elif hit.signature == "exception" and key in open_tb:
            tb = open_tb.pop(key)
            tb.end = hit.line.number
            tb.exception = hit.line
            done.append(tb)
    done.extend(open_tb.values())
    return done


def headless_tracebacks(salient: Iterable[Hit], frames: Iterable[Hit]) -> list[Hit]:
    """Heads for tracebacks pasted without their first line: in a process stream with traceback
    frames (`File "...", line N, in f`) and no 'Traceback (most recent call last)' before the
    first of them, that frame stands in for the head (class `traceback`), so an excerpt that
    starts mid-traceback is grouped, reported as cut when its exception is missing too, and
    located by its innermost frame, like one whose head survived. One head per stream; frames
    after a real head are that traceback's own."""
    first_head: dict[str, int] = {}
    for hit in salient:
        if hit.signature == "traceback":
            key = process_key(hit.line)
            first_head[key] = min(first_head.get(key, hit.line.number), hit.line.number)
    heads: dict[str, Hit] = {}
    for hit in sorted(frames, key=lambda h: (h.line.input, h.line.number)):
        key = process_key(hit.line)
        if key in heads or first_head.get(key, 1 << 62) < hit.line.number:
            continue
        heads[key] = Hit("traceback", hit.pattern_index, "salient", hit.line)
    return list(heads.values())


@dataclass
class UnexplainedLine:
    """A salient line nothing explains yet, with how often it repeats."""

    line: Line
    fingerprint: str
    count: int = 1


# Classes whose lines after a diagnosed failure of the same input are that failure's tail.
_TAIL_CLASSES = ("fatal", "exit", "service", "container", "logger", "error-line", "errno", "failed")
# Classes that say nothing at INFO / DEBUG level (a log line that quotes the state, not the event).
_LEVELLED_CLASSES = (
    "container",
    "denied",
    "kernel-error",
    "service",
    "error-line",
    "errno",
    "failed",
)
# Classes that say nothing at WARNING level either: a warning that something failed is what a
# start-up that goes on prints ("Failed to import ...; falling back")
_WARNING_GATED = ("failed",)
# A warning as loggers that triage does not frame write it (Go's level=warn, glog's W, a CLI's
# warning sign).
_WARNED = re.compile(
    r"\blevel=(?:warn|warning|info|debug)\b|^\[?[WI]\d{3,4} \d\d:|(?<![=\w])(?:WARN|WARNING|INFO)\b|\u26a0"
)
# A request-level error of a serving engine (one bad request, the server is fine).
_REQUEST_LEVEL = re.compile(r"\bserving_\w+\.py:\d+\]")


def unexplained(
    salient: list[Hit],
    explained_lines: set[tuple[str, int]],
    tracebacks: list[Traceback],
    limit: int = 20,
    failure_lines: set[tuple[str, int]] | None = None,
    ready: dict[str, list[tuple[int, int]]] | None = None,
) -> list[UnexplainedLine]:
    """Salient lines no signature accounts for, folded by fingerprint.

    A process death reported after a diagnosed failure of the same input (the C++ runtime's
    "terminate called after throwing", "core dumped", a supervisor's "Main process exited") is
    that failure's tail, not a new one: `failure_lines` are the lines of error-severity diagnoses.

    An error-level logger record (class `logger`) counts only as the head of its block (not the
    frames of a traceback logged record by record), when no other class already took the line,
    when it is not one request's error, and when its launch did not go on to report ready after it
    (`ready`: per input, the spans from a launch's start to its ready line: a start-up that
    recovered from it)."""
    first_failure: dict[str, int] = {}
    for input_name, number in failure_lines or ():
        if number < first_failure.get(input_name, 1 << 62):
            first_failure[input_name] = number
    explained_fps = set()
    covered_tracebacks: list[Traceback] = []
    by_input_line = {(h.line.input, h.line.number): h.line for h in salient}
    for key in explained_lines:
        line = by_input_line.get(key)
        if line is not None:
            explained_fps.add(mask(line.message or line.text))
    covered_tracebacks.extend(
        tb
        for tb in tracebacks
        if tb.exception and (tb.exception.input, tb.exception.number) in explained_lines
    )
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for tb in covered_tracebacks:
        spans[tb.key].append((tb.start, tb.end))
    out: dict[str, UnexplainedLine] = {}
    classes_at: dict[tuple[str, int], set[str]] = defaultdict(set)
    logger_at: set[tuple[str, int]] = set()
    for hit in salient:
        classes_at[(hit.line.input, hit.line.number)].add(hit.signature)
        if hit.signature == "logger":
            logger_at.add((process_key(hit.line), hit.line.number))
    all_spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for tb in tracebacks:
        all_spans[tb.key].append((tb.start, tb.end or tb.start + 500))
    # tracebacks whose exception line is not in the input (an excerpt or a paste cut short): the
    # traceback's first line is the only trace of the failure, reported when nothing diagnosed a
    # failure in that input (it says that something failed, not what)
    cut = {
        (tb.input, tb.start)
        for tb in tracebacks
        if tb.exception is None and tb.input not in first_failure
    }
    for hit in sorted(salient, key=lambda h: (h.line.input, h.line.number)):
        line = hit.line
        if hit.signature == "traceback" and (line.input, line.number) not in cut:
            continue
        if hit.signature == "logger" and _logger_noise(
            line, classes_at, logger_at, all_spans, (ready or {}).get(line.input, ())
        ):
            continue
        if hit.signature in _LEVELLED_CLASSES and line.level in ("INFO", "DEBUG"):
            continue
        if hit.signature in _WARNING_GATED and (
            line.level == "WARNING" or _WARNED.search(line.text or "")
        ):
            continue
        if (line.input, line.number) in explained_lines:
            continue
        text = line.message or line.text
        if any(b in text for b in _BENIGN_EXCEPTIONS):
            continue
        if (
            hit.signature == "exception"
            and line.level in ("INFO", "DEBUG", "WARNING")
            and not _looks_raised(text)
        ):
            continue  # an INFO/WARNING line that merely names an exception class
        stream = process_key(line)
        if any(a <= line.number <= b for a, b in spans.get(stream, ())):
            continue
        if hit.signature in _TAIL_CLASSES and first_failure.get(line.input, 1 << 62) < line.number:
            continue
        fp = mask(text)
        if fp in explained_fps:
            continue
        if fp in out:
            out[fp].count += line.repeated
            continue
        if len(out) >= limit:
            continue
        out[fp] = UnexplainedLine(line, fp, line.repeated)
    return list(out.values())


def _logger_noise(
    line: Line,
    classes_at: dict[tuple[str, int], set[str]],
    logger_at: set[tuple[str, int]],
    spans: dict[str, list[tuple[int, int]]],
    recovered: Iterable[tuple[int, int]],
) -> bool:
    """An error-level record that is not a failure line of its own (see `unexplained`)."""
    if classes_at[(line.input, line.number)] - {"logger"}:
        return True  # an exception, a kernel fault ...: that class reports it
    stream = process_key(line)
    if (stream, line.number - 1) in logger_at:
        return True  # the body of a block: a traceback logged record by record
    if any(a <= line.number <= b for a, b in spans.get(stream, ())):
        return True
    if _REQUEST_LEVEL.search(line.text):
        return True
    return any(start <= line.number < ready_at for start, ready_at in recovered)


def _looks_raised(text: str) -> bool:
    """An exception line as a traceback ends it: 'SomeError: message' at the start of the message."""
    head = text.split(":", 1)[0]
    return head.endswith(("Error", "Exception")) and " " not in head.strip()
