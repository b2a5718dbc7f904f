"""Parsers for what launches an engine. Nothing read here is ever executed.

Each parser turns one file into `Launch`es made of `Item`s (env vars, engine flags, host settings)
that carry the file and 1-based line where they were written. Supported: shell scripts and command
lines (with `\\` continuations, `VAR=x cmd`, `export`, `docker run`), compose files, systemd
units and drop-ins, `.env` files, Kubernetes manifests and llama-swap-style YAML.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from triage.preflight.model import Item, ItemKind, Launch

DOCKER_DEFAULT_SHM = 64 << 20
ENGINE_MODULES = {
    "vllm.entrypoints.openai.api_server": "vllm",
    "vllm.entrypoints.api_server": "vllm",
    "vllm.entrypoints.cli.main": "vllm",
    "sglang.launch_server": "sglang",
    "sglang_router.launch_server": "sglang",
}
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", "{", "}"}
# docker run options that never take a value (everything else starting with '-' does, unless '=').
_DOCKER_BOOL = {
    "-d",
    "--detach",
    "--rm",
    "-i",
    "-t",
    "-it",
    "-ti",
    "--interactive",
    "--tty",
    "--privileged",
    "--init",
    "--read-only",
    "-P",
    "--publish-all",
    "--no-healthcheck",
    "--oom-kill-disable",
    "--sig-proxy",
    "-q",
    "--quiet",
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.I)


def size_bytes(text: str) -> int | None:
    """'16g', '10.24gb', '64M', '8388608' -> bytes (docker/compose/k8s sizes), else None."""
    text = text.strip().strip("'\"")
    m = re.match(r"^([0-9]+(?:\.[0-9]+)?)\s*([KMGTP])i$", text)  # Kubernetes 16Gi
    if m:
        return int(float(m.group(1)) * (1 << (10 * " KMGTP".index(m.group(2)))))
    m = _SIZE_RE.match(text)
    if not m:
        return None
    unit = m.group(2).lower()
    return int(float(m.group(1)) * (1 << (10 * " kmgtp".index(unit if unit else " "))))


# ---------------------------------------------------------------------------------------------
# Shell text -> commands of (token, line)


@dataclass
class Token:
    text: str
    line: int


def _line_of(offsets: list[tuple[int, int]], pos: int) -> int:
    line = offsets[0][1]
    for start, number in offsets:
        if start <= pos:
            line = number
        else:
            break
    return line


def shell_commands(text: str, first_line: int = 1) -> list[list[Token]]:
    """Split shell text into simple commands (lists of tokens with their physical line).

    Continuation lines are joined; a quote left open continues on the next line; comments are
    dropped; `&&`, `;`, `|` separate commands. Variable references stay as written.
    """
    lines = text.splitlines()
    out: list[list[Token]] = []
    i = 0
    while i < len(lines):
        logical = ""
        offsets: list[tuple[int, int]] = []
        j = i
        tokens: list[str] | None = None
        while j < len(lines):
            raw = lines[j]
            offsets.append((len(logical), first_line + j))
            if raw.rstrip().endswith("\\") and not raw.rstrip().endswith("\\\\"):
                logical += raw.rstrip()[:-1] + " "
                j += 1
                continue
            logical += raw
            try:
                lex = shlex.shlex(logical, posix=True, punctuation_chars=";&|()")
                lex.whitespace_split = True
                lex.commenters = "#"
                tokens = list(lex)
                break
            except ValueError:  # open quote: the value goes on over the next line
                logical += "\n"
                j += 1
        if tokens is None:  # never closed: fall back to whitespace splitting
            tokens = logical.split()
        cursor = 0
        command: list[Token] = []
        for tok in tokens:
            probe = tok.split("\n", 1)[0][:40]
            pos = logical.find(probe, cursor) if probe else -1
            if pos >= 0:
                cursor = pos + len(probe)
            line = _line_of(offsets, pos if pos >= 0 else cursor)
            if tok in _SEPARATORS:
                if command:
                    out.append(command)
                command = []
                continue
            command.append(Token(tok, line))
        if command:
            out.append(command)
        i = j + 1
    return out


# ---------------------------------------------------------------------------------------------
# Engine argv -> flag items


def _engine_start(tokens: list[Token]) -> tuple[str, int] | None:
    """(engine, index of its first argument) when the tokens invoke an engine."""
    for k, tok in enumerate(tokens):
        base = tok.text.rsplit("/", 1)[-1]
        if base == "vllm" and k + 1 < len(tokens) and tokens[k + 1].text == "serve":
            return "vllm", k + 2
        if base.startswith("python") and tok.text != "-m":
            for m in range(k + 1, min(k + 4, len(tokens))):
                if tokens[m].text == "-m" and m + 1 < len(tokens):
                    engine = ENGINE_MODULES.get(tokens[m + 1].text)
                    if engine:
                        return engine, m + 2
        if tok.text == "-m" and k + 1 < len(tokens) and tokens[k + 1].text in ENGINE_MODULES:
            return ENGINE_MODULES[tokens[k + 1].text], k + 2
    return None


def engine_flags(tokens: list[Token], file: str, bool_flags: Iterable[str] = ()) -> list[Item]:
    """`--flag value`, `--flag=value` and boolean `--flag` as items; positionals are skipped."""
    bools = set(bool_flags)
    items: list[Item] = []
    k = 0
    if tokens and not tokens[0].text.startswith("-") and tokens[0].text != "serve":
        # `vllm serve MODEL`: the positional model, so checks can name it (--model=REGEX)
        items.append(Item("flag", "--model", tokens[0].text, file, tokens[0].line, True))
        k = 1
    while k < len(tokens):
        tok = tokens[k]
        if tok.text.startswith("--") and len(tok.text) > 2:
            if "=" in tok.text:
                name, value = tok.text.split("=", 1)
                items.append(Item("flag", normalize_flag(name), value, file, tok.line))
            elif (
                k + 1 < len(tokens)
                and normalize_flag(tok.text) not in bools
                and (
                    not tokens[k + 1].text.startswith("-")
                    or re.match(r"^-[0-9.]+$", tokens[k + 1].text)
                )
            ):
                items.append(
                    Item("flag", normalize_flag(tok.text), tokens[k + 1].text, file, tok.line)
                )
                k += 1
            else:
                items.append(Item("flag", normalize_flag(tok.text), "", file, tok.line))
        k += 1
    return items


def normalize_flag(name: str) -> str:
    """--max_model_len -> --max-model-len (argparse in vLLM accepts both; the dotted tail stays)."""
    head, dot, tail = name.partition(".")
    return "--" + head[2:].replace("_", "-") + dot + tail


# ---------------------------------------------------------------------------------------------
# docker run


def _docker_run(tokens: list[Token], start: int, file: str, launch: Launch) -> list[Token]:
    """Read `docker run` options into items; return the command after the image."""
    k = start
    while k < len(tokens):
        tok = tokens[k].text
        if not tok.startswith("-"):
            break
        if "=" in tok and tok.startswith("--"):
            name, value = tok.split("=", 1)
        elif tok in _DOCKER_BOOL or k + 1 >= len(tokens):
            name, value = tok, ""
        else:
            name, value = tok, tokens[k + 1].text
            k += 1
        line = tokens[k].line
        _docker_option(name, value, file, line, launch)
        k += 1
    if k < len(tokens):
        launch.image = tokens[k].text
        return tokens[k + 1 :]
    return []


def _docker_option(name: str, value: str, file: str, line: int, launch: Launch) -> None:
    if name in ("-e", "--env"):
        n, _, v = value.partition("=")
        launch.items.append(Item("env", n, v, file, line))
    elif name in ("--ipc", "--shm-size", "--gpus", "--runtime", "--device", "--privileged"):
        launch.items.append(Item("setting", name.lstrip("-").replace("-", "_"), value, file, line))
    elif name == "--ulimit":
        n, _, v = value.partition("=")
        if n == "memlock":
            launch.items.append(Item("setting", "LimitMEMLOCK", _memlock(v), file, line))
        else:
            launch.items.append(Item("setting", f"ulimit_{n}", v, file, line))


# Variables a serving stack reads (the engine, PyTorch, NCCL, CUDA, Hugging Face): exported in the
# shell but not passed into a container, they are a launch mistake worth naming.
_STACK_ENV = re.compile(r"^(?:VLLM|SGLANG|SGL|NCCL|CUDA|TORCH|PYTORCH|HF|HUGGING_FACE|TRITON)_")


def _pass_through(launch: Launch, env_scope: list[Item]) -> None:
    """`-e NAME` without a value passes the shell's value in: take it from the script's exports.
    Exported stack variables the container is not given go to `launch.shell_only`."""
    exported = {item.name: item for item in env_scope}
    passed = set()
    for i, item in enumerate(launch.items):
        if item.kind != "env":
            continue
        passed.add(item.name)
        if item.value == "" and item.name in exported:
            shell = exported[item.name]
            launch.items[i] = Item(
                "env", item.name, shell.value, item.file, item.line, note="from the shell"
            )
    launch.shell_only = [
        item
        for name, item in exported.items()
        if name not in passed and _STACK_ENV.match(name) is not None
    ]


def _memlock(value: str) -> str:
    soft = value.split(":", 1)[0].strip()
    return "infinity" if soft in ("-1", "unlimited") else soft


def _container_facts(launch: Launch, file: str, line: int) -> None:
    """Synthetic settings for a container that runs an engine: its /dev/shm and GPU request."""
    if not (launch.engine or _engine_image(launch.image)):
        return
    settings = launch.settings()
    ipc = settings.get("ipc")
    shm = settings.get("shm_size")
    if ipc is not None and ipc.value == "host":
        launch.items.append(
            Item(
                "setting",
                "ShmBytes",
                "host",
                ipc.file,
                ipc.line,
                True,
                "ipc: host shares the host's /dev/shm",
            )
        )
    elif shm is not None:
        size = size_bytes(shm.value)
        shown = str(size) if size is not None else shm.value
        launch.items.append(Item("setting", "ShmBytes", shown, shm.file, shm.line, True))
    elif "shmvolume" in settings:
        vol = settings["shmvolume"]
        launch.items.append(Item("setting", "ShmBytes", vol.value, vol.file, vol.line, True))
    else:
        launch.items.append(
            Item(
                "setting",
                "ShmBytes",
                str(DOCKER_DEFAULT_SHM),
                file,
                line,
                True,
                "no ipc: host, shm_size or /dev/shm volume: the runtime's 64 MiB default applies",
            )
        )
    gpu = None
    for key in ("gpus", "gpu_devices", "nvidia.com/gpu"):
        if key in settings:
            gpu = settings[key]
            break
    runtime = settings.get("runtime")
    env = launch.env()
    if gpu is None and runtime is not None and runtime.value == "nvidia":
        gpu = runtime
    if gpu is None and "NVIDIA_VISIBLE_DEVICES" in env and runtime is not None:
        gpu = env["NVIDIA_VISIBLE_DEVICES"]
    if gpu is None and "device" in settings and "nvidia" in settings["device"].value:
        gpu = settings["device"]
    if gpu is None:
        launch.items.append(
            Item(
                "setting",
                "GpuRequest",
                "none",
                file,
                line,
                True,
                "no --gpus / deploy.resources devices / nvidia.com/gpu request",
            )
        )
    else:
        launch.items.append(
            Item("setting", "GpuRequest", gpu.value or "requested", gpu.file, gpu.line, True)
        )


def _engine_image(image: str | None) -> str | None:
    if not image:
        return None
    low = image.lower()
    if "sglang" in low:
        return "sglang"
    if "vllm" in low:
        return "vllm"
    return None


def image_version(image: str | None) -> str | None:
    """vllm/vllm-openai:v0.31.0 -> 0.31.0 (None for latest, nightly or a digest)."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    m = re.match(r"^v?([0-9]+\.[0-9]+(?:\.[0-9]+)?(?:\.post[0-9]+|rc[0-9]+)?)", tag)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------------------
# Commands -> launches


def _apply_command(
    tokens: list[Token],
    file: str,
    launch: Launch,
    env_scope: list[Item],
    bool_flags: Iterable[str],
    container: bool = False,
) -> bool:
    """Fold one simple command into the launch; True when it runs an engine or a container."""
    k = 0
    prefix_env: list[Item] = []
    while k < len(tokens):
        text = tokens[k].text
        if text == "export" or text == "declare" or (text == "-x" and k > 0):
            k += 1
            continue
        m = _ASSIGN_RE.match(text)
        if m:
            prefix_env.append(Item("env", m.group(1), m.group(2), file, tokens[k].line))
            k += 1
            continue
        break
    rest = tokens[k:]
    if not rest:  # plain assignments / exports: they hold for the rest of the script
        env_scope.extend(prefix_env)
        return False
    words = [t.text for t in rest]
    if (
        len(words) >= 2
        and words[0].rsplit("/", 1)[-1] in ("docker", "podman", "nerdctl")
        and (words[1] == "run" or words[1:3] == ["container", "run"])
    ):
        launch.container = True
        launch.line = rest[0].line
        start = 2 if words[1] == "run" else 3
        launch.items.extend(prefix_env)
        cmd = _docker_run(rest, start, file, launch)
        _pass_through(launch, env_scope)
        found = _engine_start(cmd)
        if found:
            launch.engine, at = found
            launch.items.extend(engine_flags(cmd[at:], file, bool_flags))
        elif (
            _engine_image(launch.image)
            and cmd
            and (cmd[0].text.startswith("-") or cmd[0].text in ("serve",))
        ):
            launch.engine = _engine_image(launch.image)  # the image's entrypoint is the server
            at = 1 if cmd[0].text == "serve" else 0
            launch.items.extend(engine_flags(cmd[at:], file, bool_flags))
        elif _engine_image(launch.image):
            launch.engine = _engine_image(launch.image)
        _container_facts(launch, file, launch.line)
        return True
    found = _engine_start(rest)
    if found:
        launch.engine, at = found
        launch.line = rest[0].line
        launch.items.extend(env_scope)
        launch.items.extend(prefix_env)
        launch.items.extend(engine_flags(rest[at:], file, bool_flags))
        if container:
            launch.container = True
        return True
    return False


def parse_shell(path: Path, text: str, bool_flags: Iterable[str] = ()) -> list[Launch]:
    file = str(path)
    env_scope: list[Item] = []
    launches: list[Launch] = []
    for n, command in enumerate(shell_commands(text)):
        launch = Launch(
            file=file, name=f"{path.name}:{command[0].line}", line=command[0].line, kind="shell"
        )
        if _apply_command(command, file, launch, env_scope, bool_flags):
            launch.name = f"{path.name}:{launch.line}"
            launches.append(launch)
        del n
    if not launches and env_scope:  # a script that only exports variables (sourced by another)
        launches.append(
            Launch(
                file=file,
                name=path.name,
                line=env_scope[0].line,
                kind="shell",
                items=list(env_scope),
            )
        )
    return launches


def parse_dotenv(path: Path, text: str) -> list[Launch]:
    file = str(path)
    launch = Launch(file=file, name=path.name, line=1, kind="dotenv")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].strip()
        m = _ASSIGN_RE.match(line)
        if not m:
            continue
        value = m.group(2).strip()
        if value[:1] in ("'", '"') and value.endswith(value[0]) and len(value) > 1:
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        launch.items.append(Item("env", m.group(1), value, file, number))
    return [launch] if launch.items else []


def dotenv_values(path: Path) -> dict[str, str]:
    try:
        launches = parse_dotenv(path, path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
    return {i.name: i.value for launch in launches for i in launch.items}


# ---------------------------------------------------------------------------------------------
# systemd


@dataclass
class _Entry:
    section: str
    key: str
    value: str
    file: str
    line: int


def _systemd_entries(path: Path, text: str) -> list[_Entry]:
    entries: list[_Entry] = []
    section = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].strip()
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            nxt = lines[i].strip()
            if nxt.startswith(("#", ";")):
                line += "\n"  # keep the physical line count for ExecStart's token lines
                continue
            line = line + "\n" + nxt  # continuation kept: shell_commands maps tokens to lines
        i += 1
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if "=" in line:
            key, value = line.split("=", 1)
            key = key.strip()
            if key != "ExecStart":
                value = re.sub(r"\\\n+", " ", value)
            entries.append(_Entry(section, key, value.strip(), str(path), number))
    return entries


# Keys where every assignment adds to a list and an empty assignment resets it.
_LIST_KEYS = {
    "Environment",
    "EnvironmentFile",
    "ExecStart",
    "ExecStartPre",
    "RestrictAddressFamilies",
    "ReadWritePaths",
    "SystemCallFilter",
    "DeviceAllow",
    "StateDirectory",
    "CacheDirectory",
}


def parse_systemd(
    path: Path, text: str, dropins: Iterable[tuple[Path, str]] = (), bool_flags: Iterable[str] = ()
) -> list[Launch]:
    """A unit and its drop-ins (applied in name order) as one launch with its effective settings."""
    entries = _systemd_entries(path, text)
    for dpath, dtext in sorted(dropins, key=lambda p: p[0].name):
        entries.extend(_systemd_entries(dpath, dtext))
    unit = path.name
    if path.suffix == ".conf" and path.parent.name.endswith(".d"):
        unit = path.parent.name[:-2]
    launch = Launch(file=str(path), name=unit, line=1, kind="systemd")
    values: dict[str, list[_Entry]] = {}
    for e in entries:
        if e.section not in ("Service", "Unit", "Install", ""):
            continue
        if e.key in _LIST_KEYS:
            if e.value == "":
                values[e.key] = []
            else:
                values.setdefault(e.key, []).append(e)
        else:
            values[e.key] = [e]
    file = str(path)
    for key, es in values.items():
        if not es:
            continue
        last = es[-1]
        if key == "Environment":
            for e in es:
                try:
                    words = shlex.split(e.value)
                except ValueError:
                    words = e.value.split()
                for w in words:
                    m = _ASSIGN_RE.match(w)
                    if m:
                        launch.items.append(Item("env", m.group(1), m.group(2), e.file, e.line))
        elif key == "EnvironmentFile":
            for e in es:
                env_path = Path(e.value.lstrip("-"))
                if not env_path.is_absolute():
                    env_path = Path(e.file).parent / env_path
                if env_path.is_file():
                    for sub in parse_dotenv(
                        env_path, env_path.read_text(encoding="utf-8", errors="replace")
                    ):
                        launch.items.extend(sub.items)
                else:
                    launch.notes.append(f"EnvironmentFile {e.value} not readable here")
        elif key == "ExecStart":
            for e in es:
                cmd = re.sub(r"^[-@:+!]+", "", e.value)
                for command in shell_commands(cmd, e.line):
                    sub = Launch(file=e.file, name=unit, line=e.line, kind="systemd")
                    if _apply_command(command, e.file, sub, [], bool_flags):
                        launch.engine = sub.engine
                        launch.items.extend(sub.items)
                        launch.line = e.line
            launch.items.append(Item("setting", key, last.value, last.file, last.line))
        elif key == "RestrictAddressFamilies":
            allowed = " ".join(e.value for e in es)
            launch.items.append(Item("setting", key, allowed, last.file, last.line))
        else:
            launch.items.append(Item("setting", key, last.value, last.file, last.line))
    if launch.engine is None and file.endswith(".conf"):
        launch.name = unit
    return [launch] if launch.items else []


# ---------------------------------------------------------------------------------------------
# YAML (compose, Kubernetes, llama-swap) with line numbers


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v if isinstance(v, yaml.Node) else None
    return None


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _scalar(node: yaml.Node | None) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _block_first_line(node: yaml.ScalarNode) -> int:
    """Line of a scalar's first character of content ('|' and '>' blocks start a line later)."""
    return _line(node) + (1 if node.style in ("|", ">") else 0)


def _scalar_text(node: yaml.ScalarNode, src: str | None, one_command: bool) -> tuple[str, int]:
    """A scalar's text laid out on its source lines, so tokens keep their line numbers.

    Folded ('>') blocks, and every block when `one_command` (llama-swap's cmd), are one command:
    their lines are joined with shell continuations instead of being separate commands.
    """
    first = _block_first_line(node)
    if src is None or node.style not in ("|", ">"):
        return str(node.value), first
    raw = src[node.start_mark.index : node.end_mark.index].split("\n")[1:]
    body = [ln.strip() for ln in raw]
    while body and not body[-1]:
        body.pop()
    if node.style == ">" or one_command:
        body = [
            ln + " \\" if ln and not ln.startswith("#") and k < len(body) - 1 else ln
            for k, ln in enumerate(body)
        ]
    return "\n".join(body), first


_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:?-[^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _interpolate(text: str, env: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        if name in env and env[name] != "":
            return env[name]
        return (
            (default or "")[2:]
            if default and default.startswith(":-")
            else (default[1:] if default and default.startswith("-") else "")
        )

    return _VAR_RE.sub(repl, text)


def _tokens_from(
    node: yaml.Node | None, env: dict[str, str], src: str | None = None
) -> list[Token]:
    if isinstance(node, yaml.SequenceNode):
        out: list[Token] = []
        for item in node.value:
            if isinstance(item, yaml.ScalarNode):
                value = _interpolate(str(item.value), env)
                if item.value.startswith("${") and " " in value:  # "${EXTRA_ARGS}" expands to words
                    out.extend(Token(w, _line(item)) for w in shlex.split(value))
                else:
                    out.append(Token(value, _line(item)))
        return out
    if isinstance(node, yaml.ScalarNode):
        tokens: list[Token] = []
        text, first = _scalar_text(node, src, one_command=True)
        for command in shell_commands(_interpolate(text, env), first):
            tokens.extend(command)
        return tokens
    return []


def _env_from(node: yaml.Node | None, file: str, env: dict[str, str]) -> list[Item]:
    items: list[Item] = []
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            value = _scalar(v)
            items.append(Item("env", str(k.value), _interpolate(value or "", env), file, _line(k)))
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            text = _scalar(item)
            if text is None:
                name = _scalar(_get(item, "name"))
                if name:
                    val = _scalar(_get(item, "value")) or ""
                    items.append(Item("env", name, val, file, _line(item)))
                continue
            n, _, val = text.partition("=")
            items.append(Item("env", n.strip(), _interpolate(val, env), file, _line(item)))
    return items


def parse_compose(
    path: Path, root: yaml.Node, bool_flags: Iterable[str] = (), src: str | None = None
) -> list[Launch]:
    file = str(path)
    env_file = path.parent / ".env"
    interp = dotenv_values(env_file) if env_file.is_file() else {}
    services = _get(root, "services")
    launches: list[Launch] = []
    if not isinstance(services, yaml.MappingNode):
        return launches
    for key, svc in services.value:
        launch = Launch(
            file=file, name=str(key.value), line=_line(key), kind="compose", container=True
        )
        launch.image = _interpolate(_scalar(_get(svc, "image")) or "", interp) or None
        for ef in _env_file_paths(_get(svc, "env_file"), path.parent):
            if ef.is_file():
                for sub in parse_dotenv(ef, ef.read_text(encoding="utf-8", errors="replace")):
                    launch.items.extend(sub.items)
            else:
                launch.notes.append(f"env_file {ef} not readable here")
        launch.items.extend(_env_from(_get(svc, "environment"), file, interp))
        for name in ("ipc", "shm_size", "runtime", "privileged"):
            node = _get(svc, name)
            if isinstance(node, yaml.ScalarNode):
                launch.items.append(
                    Item("setting", name, _interpolate(str(node.value), interp), file, _line(node))
                )
        gpus = _get(svc, "gpus")
        if gpus is not None:
            launch.items.append(
                Item("setting", "gpus", _scalar(gpus) or "requested", file, _line(gpus))
            )
        devices = _get(_get(_get(_get(svc, "deploy"), "resources"), "reservations"), "devices")
        if isinstance(devices, yaml.SequenceNode):
            for dev in devices.value:
                caps = _get(dev, "capabilities")
                driver = _scalar(_get(dev, "driver")) or ""
                cap_text = " ".join(
                    str(c.value)
                    for c in getattr(caps, "value", [])
                    if isinstance(c, yaml.ScalarNode)
                )
                if "gpu" in cap_text or driver == "nvidia":
                    count = _scalar(_get(dev, "count")) or _scalar(_get(dev, "device_ids")) or "all"
                    launch.items.append(Item("setting", "gpu_devices", count, file, _line(dev)))
        memlock = _get(_get(svc, "ulimits"), "memlock")
        if memlock is not None:
            soft = _scalar(memlock) or _scalar(_get(memlock, "soft")) or ""
            launch.items.append(
                Item("setting", "LimitMEMLOCK", _memlock(soft), file, _line(memlock))
            )
        tokens = _tokens_from(_get(svc, "entrypoint"), interp, src) + _tokens_from(
            _get(svc, "command"), interp, src
        )
        _container_launch(launch, tokens, file, bool_flags)
        launches.append(launch)
    return launches


def _env_file_paths(node: yaml.Node | None, base: Path) -> list[Path]:
    names: list[str] = []
    if isinstance(node, yaml.ScalarNode):
        names.append(str(node.value))
    elif isinstance(node, yaml.SequenceNode):
        names.extend(_scalar(item) or _scalar(_get(item, "path")) or "" for item in node.value)
    return [base / n for n in names if n]


_K8S_WORKLOADS = {
    "Pod",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "ReplicaSet",
    "LeaderWorkerSet",
}


def _pod_specs(doc: yaml.Node) -> list[yaml.Node]:
    """Every pod spec (a mapping with `containers`) anywhere in the document."""
    found: list[yaml.Node] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            if isinstance(_get(node, "containers"), yaml.SequenceNode):
                found.append(node)
            stack.extend(v for _, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return found


def parse_kubernetes(
    path: Path, docs: list[yaml.Node], bool_flags: Iterable[str] = (), src: str | None = None
) -> list[Launch]:
    file = str(path)
    launches: list[Launch] = []
    for doc in docs:
        kind = _scalar(_get(doc, "kind")) or ""
        if kind not in _K8S_WORKLOADS:
            continue
        wname = _scalar(_get(_get(doc, "metadata"), "name")) or kind
        for spec in _pod_specs(doc):
            shm_volumes: dict[str, tuple[str, int]] = {}
            vols = _get(spec, "volumes")
            for vol in getattr(vols, "value", []):
                empty = _get(vol, "emptyDir")
                if empty is not None and (_scalar(_get(empty, "medium")) or "") == "Memory":
                    limit = _scalar(_get(empty, "sizeLimit"))
                    size = size_bytes(limit) if limit else None
                    shm_volumes[_scalar(_get(vol, "name")) or ""] = (
                        str(size) if size is not None else "unbounded",
                        _line(vol),
                    )
            containers = _get(spec, "containers")
            for c in getattr(containers, "value", []):
                cname = _scalar(_get(c, "name")) or "container"
                launch = Launch(
                    file=file,
                    name=f"{wname}/{cname}",
                    line=_line(c),
                    kind="kubernetes",
                    container=True,
                )
                launch.image = _scalar(_get(c, "image"))
                launch.items.extend(_env_from(_get(c, "env"), file, {}))
                for mount in getattr(_get(c, "volumeMounts"), "value", []):
                    if _scalar(_get(mount, "mountPath")) == "/dev/shm":
                        vname = _scalar(_get(mount, "name")) or ""
                        if vname in shm_volumes:
                            val, line = shm_volumes[vname]
                            launch.items.append(Item("setting", "ShmVolume", val, file, line))
                res = _get(c, "resources")
                for part in ("limits", "requests"):
                    gpu = _get(_get(res, part), "nvidia.com/gpu")
                    if gpu is not None and (_scalar(gpu) or "0") != "0":
                        launch.items.append(
                            Item("setting", "nvidia.com/gpu", _scalar(gpu) or "", file, _line(gpu))
                        )
                        break
                tokens = _tokens_from(_get(c, "command"), {}, src) + _tokens_from(
                    _get(c, "args"), {}, src
                )
                _container_launch(launch, tokens, file, bool_flags)
                launches.append(launch)
    return launches


def _container_launch(
    launch: Launch, tokens: list[Token], file: str, bool_flags: Iterable[str]
) -> None:
    """The engine a container runs (from its command, else its image) and its flags and facts."""
    found = _engine_start(tokens)
    if found:
        launch.engine, at = found
        launch.items.extend(engine_flags(tokens[at:], file, bool_flags))
    elif _engine_image(launch.image):
        launch.engine = _engine_image(launch.image)
        launch.items.extend(engine_flags(tokens, file, bool_flags))
    _container_facts(launch, file, launch.line)


def parse_llama_swap(
    path: Path, root: yaml.Node, bool_flags: Iterable[str] = (), src: str | None = None
) -> list[Launch]:
    file = str(path)
    launches: list[Launch] = []
    models = _get(root, "models")
    for key, model in getattr(models, "value", []):
        launch = Launch(file=file, name=str(key.value), line=_line(key), kind="llama-swap")
        launch.items.extend(_env_from(_get(model, "env"), file, {}))
        cmd = _get(model, "cmd")
        if isinstance(cmd, yaml.ScalarNode):
            text, first = _scalar_text(cmd, src, one_command=True)
            for command in shell_commands(text, first):
                if _apply_command(command, file, launch, [], bool_flags):
                    launch.line = command[0].line
        else:
            launch.items.append(
                Item("setting", "cmd", "", file, _line(key), True, "entry without cmd")
            )
        if launch.items:
            launches.append(launch)
    return launches


# ---------------------------------------------------------------------------------------------
# Dispatch


def detect_kind(path: Path, text: str) -> str:
    name = path.name.lower()
    if (
        name.endswith((".service", ".socket", ".target"))
        or (name.endswith(".conf") and path.parent.name.endswith(".d"))
        or re.search(r"^\[(?:Service|Unit)\]\s*$", text, re.M)
    ):
        return "systemd"
    if name == ".env" or name.endswith(".env") or name.startswith(".env."):
        return "dotenv"
    if name.endswith((".yaml", ".yml", ".json")):
        return "yaml"
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if (
        lines
        and all(_ASSIGN_RE.match(ln.removeprefix("export ").strip()) for ln in lines)
        and not name.endswith(".sh")
    ):
        return "dotenv"
    return "shell"


class ParseError(Exception):
    pass


def parse_file(path: Path, bool_flags: Iterable[str] = (), text: str | None = None) -> list[Launch]:
    """Every launch in one config file (a directory of drop-ins is read with its unit)."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ParseError(f"{path}: {exc.strerror or exc}") from None
    kind = detect_kind(path, text)
    if kind == "systemd":
        dropins: list[tuple[Path, str]] = []
        ddir = path.parent / (path.name + ".d")
        if ddir.is_dir():
            dropins.extend(
                (conf, conf.read_text(encoding="utf-8", errors="replace"))
                for conf in sorted(ddir.glob("*.conf"))
            )
        return parse_systemd(path, text, dropins, bool_flags)
    if kind == "dotenv":
        return parse_dotenv(path, text)
    if kind == "yaml":
        try:
            docs = list(yaml.compose_all(text))
        except yaml.YAMLError as exc:
            raise ParseError(f"{path}: not valid YAML: {exc}") from None
        if not docs:
            return []
        first = docs[0]
        if _get(first, "services") is not None:
            return parse_compose(path, first, bool_flags, text)
        if any(_get(d, "apiVersion") is not None and _get(d, "kind") is not None for d in docs):
            return parse_kubernetes(path, docs, bool_flags, text)
        if _get(first, "models") is not None:
            return parse_llama_swap(path, first, bool_flags, text)
        return []
    return parse_shell(path, text, bool_flags)


def item_kinds() -> tuple[ItemKind, ...]:
    return ("env", "flag", "setting")
