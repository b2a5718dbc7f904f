"""Shell completion scripts for bash, zsh and fish, written from the main parser's own options and
the subcommand table, so they list exactly what `triage --help` does (`triage --completion SHELL`;
docs/install.md says where each shell looks for them)."""

from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh", "fish")


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings]


def _choices(action: argparse.Action) -> list[str]:
    return [str(c) for c in action.choices] if action.choices else []


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and not isinstance(
        action, argparse._StoreConstAction | argparse._StoreTrueAction | argparse._HelpAction
    )


def _wants_dir(action: argparse.Action) -> bool:
    return action.dest in ("signatures",)


def script(shell: str, parser: argparse.ArgumentParser, commands: list[str], kb: list[str]) -> str:
    """The completion script for shell."""
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](parser, commands, kb)


def _bash(parser: argparse.ArgumentParser, commands: list[str], kb: list[str]) -> str:
    options = " ".join(s for a in _options(parser) for s in a.option_strings)
    cases = []
    for action in _options(parser):
        if not _takes_value(action):
            continue
        names = "|".join(action.option_strings)
        choices = _choices(action)
        if choices:
            reply = f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(choices))} -- "$cur"))'
        elif _wants_dir(action):
            reply = 'COMPREPLY=($(compgen -d -- "$cur"))'
        else:
            reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
        cases.append(f"        {names}) {reply}; return ;;")
    return "\n".join(
        [
            "# bash completion for triage (triage --completion bash)",
            "_triage() {",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
            '    case "$prev" in',
            *cases,
            "    esac",
            "    if [[ $COMP_CWORD -eq 2 && ${COMP_WORDS[1]} == kb ]]; then",
            f'        COMPREPLY=($(compgen -W {shlex.quote(" ".join(kb))} -- "$cur")); return',
            "    fi",
            "    if [[ $cur == -* ]]; then",
            f'        COMPREPLY=($(compgen -W {shlex.quote(options)} -- "$cur")); return',
            "    fi",
            "    if [[ $COMP_CWORD -eq 1 ]]; then",
            f'        COMPREPLY=($(compgen -W {shlex.quote(" ".join(commands))} -- "$cur") '
            '$(compgen -f -- "$cur")); return',
            "    fi",
            '    COMPREPLY=($(compgen -f -- "$cur"))',
            "}",
            "complete -o filenames -o bashdefault -F _triage triage",
            "",
        ]
    )


def _zsh_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]")


def _zsh(parser: argparse.ArgumentParser, commands: list[str], kb: list[str]) -> str:
    specs = []
    for action in _options(parser):
        helptext = _zsh_quote((action.help or "").split(" (")[0])
        for flag in action.option_strings:
            value = ""
            if _takes_value(action):
                choices = _choices(action)
                if choices:
                    value = f":{action.dest}:({' '.join(choices)})"
                elif _wants_dir(action):
                    value = f":{action.dest}:_directories"
                else:
                    value = f":{action.dest}:_files"
            specs.append(f"    '{flag}[{helptext}]{value}' \\")
    return "\n".join(
        [
            "#compdef triage",
            "# zsh completion for triage (triage --completion zsh)",
            "_triage() {",
            "  local state",
            "  _arguments -s \\",
            *specs,
            "    '*:input:->inputs'",
            "  case $state in",
            "    inputs)",
            "      if (( CURRENT == 2 )); then",
            f"        _alternative 'commands:subcommand:({' '.join(commands)})' 'files:log:_files'",
            "      elif [[ ${words[2]} == kb && CURRENT -eq 3 ]]; then",
            f"        _values 'kb subcommand' {' '.join(kb)}",
            "      else",
            "        _files",
            "      fi",
            "      ;;",
            "  esac",
            "}",
            '_triage "$@"',
            "",
        ]
    )


def _fish(parser: argparse.ArgumentParser, commands: list[str], kb: list[str]) -> str:
    lines = [
        "# fish completion for triage (triage --completion fish)",
        f"complete -c triage -n __fish_use_subcommand -a {shlex.quote(' '.join(commands))}",
        f"complete -c triage -n '__fish_seen_subcommand_from kb' -f -a {shlex.quote(' '.join(kb))}",
    ]
    for action in _options(parser):
        parts = ["complete -c triage"]
        parts.extend(
            f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
            for flag in action.option_strings
        )
        if _takes_value(action):
            choices = _choices(action)
            if choices:
                parts.append(f"-x -a {shlex.quote(' '.join(choices))}")
            else:
                parts.append("-r -F")
        if action.help:
            parts.append(f"-d {shlex.quote(action.help.split(' (')[0])}")
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"
