"""What the config parsers produce (launches made of items) and what the rules report (findings)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

ItemKind = Literal["env", "flag", "setting"]


@dataclass(frozen=True)
class Item:
    """One env var, engine flag or host setting, with where it was written."""

    kind: ItemKind
    name: str
    value: str
    file: str
    line: int
    synthetic: bool = False  # derived by the parser (e.g. the default /dev/shm size of a container)
    note: str = ""

    def shown(self) -> str:
        if self.kind == "flag":
            return f"{self.name} {self.value}".strip()
        return f"{self.name}={self.value}"


@dataclass
class Launch:
    """One thing that starts (or configures) an engine: a script command, a compose service, a
    systemd unit with its drop-ins, a Kubernetes container, a llama-swap model, a .env file."""

    file: str
    name: str
    line: int
    kind: str  # shell, docker, compose, systemd, dotenv, kubernetes, llama-swap
    engine: str | None = None  # vllm, sglang, or None when nothing launches an engine
    image: str | None = None
    items: list[Item] = field(default_factory=list)
    container: bool = False  # runs in a container (docker run, compose, Kubernetes)
    notes: list[str] = field(default_factory=list)
    # Variables the script exports in its own shell that a container launch does not pass in
    # (no `-e NAME`): the engine inside never sees them.
    shell_only: list[Item] = field(default_factory=list)

    def env(self) -> dict[str, Item]:
        return {i.name: i for i in self.items if i.kind == "env"}

    def flags(self) -> dict[str, Item]:
        return {i.name: i for i in self.items if i.kind == "flag"}

    def settings(self) -> dict[str, Item]:
        return {i.name.lower(): i for i in self.items if i.kind == "setting"}


@dataclass
class Finding:
    file: str
    line: int
    signature: str
    layer: str
    severity: str
    message: str
    evidence: str
    fix: str | None = None
    rule: str = "kb-config"  # kb-config, env-unknown, flag-unknown, backend-unknown
    launch: str = ""
    confidence: str = "high"  # high; lowered when the engine version is unknown or out of range
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def sort_key(self) -> tuple[str, int, str]:
        return (self.file, self.line, self.signature)
