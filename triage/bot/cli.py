"""The bot's commands: `triage comment`, `triage bot github|gitea`, `triage serve`, `triage run`,
`triage watch`. `triage.cli` dispatches to `APPS[name]`. Tokens and secrets are read from
environment variables named by options (never from arguments, which other users can see).
Exit status as for `triage`: 0 nothing failed, 1 a failure diagnosed, 2 usage or input error.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from triage.bot.forge import Comment, Forge
from triage.cliapp import subcommand_app

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


comment_app = subcommand_app(
    "Print the Markdown comment a bot would post for these logs or issue bodies."
)
bot_app = subcommand_app("Answer the issue of a CI event (GitHub Actions, Forgejo/Gitea Actions).")
serve_app = subcommand_app("Run the webhook server for GitHub, Gitea and Forgejo.")
run_app = subcommand_app(
    "Triage a benchmark run directory; write triage.md and triage.json into it."
)
watch_app = subcommand_app("Follow a results tree; triage each run that finishes with a failure.")

APPS: dict[str, typer.Typer] = {
    "comment": comment_app,
    "bot": bot_app,
    "serve": serve_app,
    "run": run_app,
    "watch": watch_app,
}


def _fail(message: str) -> typer.Exit:
    typer.echo(f"triage: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _engine(signatures: Path | None = None) -> Any:
    from triage.api import Engine, load_kb

    return Engine(load_kb(signatures))


def _token(env_name: str, required: bool) -> str:
    token = os.environ.get(env_name, "")
    if required and not token:
        raise _fail(f"no token: set the environment variable {env_name}")
    return token


class _OfflineForge(Forge):
    """Dry run without a token: no thread to read, nothing written."""

    kind = "offline"

    def _auth(self) -> str:
        return ""

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        return []

    def fetch_attachment(self, url: str, max_bytes: int = 0) -> str | None:
        return None


def _forge(
    kind: str,
    api_url: str,
    token_env: str,
    dry_run: bool,
    per_minute: int = 20,
    per_hour: int = 300,
) -> Forge:
    from triage.bot.forge import make_forge
    from triage.bot.ratelimit import WriteLimiter

    token = _token(token_env, required=not dry_run)
    if not token:
        return _OfflineForge(api_url or "http://offline.invalid", "")
    try:
        return make_forge(kind, api_url, token, limiter=WriteLimiter(per_minute, per_hour))
    except ValueError as exc:
        raise _fail(str(exc)) from None


@comment_app.command()
def comment(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Log files, directories, or '-' for stdin; with --issue, Markdown issue bodies"
        ),
    ] = None,
    issue: Annotated[
        bool, typer.Option("--issue", help="Inputs are issue bodies (Markdown)")
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", help="Maximum comment size in characters")
    ] = 60_000,
    signatures: Annotated[
        Path | None, typer.Option("--signatures", help="Signature directory")
    ] = None,
) -> None:
    """Print the comment (one-line verdict, hypotheses, evidence, fixes, asks), secrets redacted."""
    from triage.bot.diagnose import TextInput, diagnose
    from triage.bot.issue import ParsedIssue, parse_issue
    from triage.read import InputError, expand_inputs

    args = inputs or ["-"]
    if args == ["-"] and sys.stdin.isatty():
        raise _fail("no input: give a log file, a directory, or pipe a log on stdin")
    texts: list[TextInput] = []
    files: list[tuple[str, Path]] = []
    env_text = ""
    parsed: ParsedIssue | None = None
    try:
        pairs = expand_inputs(args)
    except InputError as exc:
        raise _fail(str(exc)) from None
    for name, path in pairs:
        if issue:
            raw = sys.stdin.buffer.read() if path is None else path.read_bytes()
            part = parse_issue(raw.decode("utf-8", "replace"), label=Path(name).name)
            texts.extend(TextInput(b.name, b.text, b.first_line) for b in part.blocks)
            env_text += part.env_text
            if parsed is None:
                parsed = part
            else:
                parsed.blocks.extend(part.blocks)
                parsed.env_section = parsed.env_section or part.env_section
                parsed.images += part.images
        elif path is None:
            texts.append(TextInput(name, sys.stdin.buffer.read().decode("utf-8", "replace")))
        else:
            files.append((name, path))
    diag = diagnose(
        _engine(signatures), texts, files=files, env_text=env_text, parsed=parsed, limit=limit
    )
    if not issue and all(i.lines == 0 for i in diag.report.inputs):
        raise _fail("empty input: nothing to triage")
    sys.stdout.write(diag.markdown)
    raise typer.Exit(EXIT_FAILURE if diag.report.failed else EXIT_OK)


def _event_name(explicit: str | None, payload: Any) -> str:
    if explicit:
        return explicit
    env = os.environ.get("GITHUB_EVENT_NAME", "")
    if env:
        return env
    return "issue_comment" if isinstance(payload, dict) and "comment" in payload else "issues"


def _run_event(
    kind: str,
    event: Path,
    event_name: str | None,
    api_url: str,
    token_env: str,
    bot_login: str,
    dry_run: bool,
) -> None:
    from triage.bot.events import job_from_event
    from triage.bot.respond import IssueBot

    engine = _engine()  # first: a bot without its knowledge base must fail loudly, not comment
    try:
        payload = json.loads(event.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _fail(f"{event}: cannot read the event payload: {exc}") from None
    name = _event_name(event_name, payload)
    job = job_from_event(name, payload, bot_login=bot_login)
    if isinstance(job, str):
        typer.echo(f"triage: nothing to do ({job})")
        raise typer.Exit(EXIT_OK)
    forge = _forge(kind, api_url, token_env, dry_run)
    bot = IssueBot(engine, forge, bot_login, dry_run=dry_run, echo=typer.echo)
    from triage.bot.forge import ForgeError

    try:
        action = bot.handle(job)
    except ForgeError as exc:
        typer.echo(f"triage: forge error: {exc}", err=True)
        raise typer.Exit(EXIT_FAILURE) from None
    typer.echo(f"triage: {job.repo}#{job.number}: {action}")
    raise typer.Exit(EXIT_OK)


@bot_app.command("github")
def bot_github(
    event: Annotated[Path, typer.Option("--event", help="Event payload file ($GITHUB_EVENT_PATH)")],
    event_name: Annotated[
        str | None,
        typer.Option("--event-name", help="issues or issue_comment (default: $GITHUB_EVENT_NAME)"),
    ] = None,
    api_url: Annotated[
        str, typer.Option("--api-url", envvar="GITHUB_API_URL")
    ] = "https://api.github.com",
    token_env: Annotated[
        str, typer.Option("--token-env", help="Variable holding the token")
    ] = "GITHUB_TOKEN",
    bot_login: Annotated[str, typer.Option("--bot-login")] = "github-actions[bot]",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be posted")] = False,
) -> None:
    """Triage the issue of a GitHub Actions `issues`/`issue_comment` event and post one comment."""
    _run_event("github", event, event_name, api_url, token_env, bot_login, dry_run)


@bot_app.command("gitea")
def bot_gitea(
    event: Annotated[Path, typer.Option("--event", help="Event payload file")],
    api_url: Annotated[str, typer.Option("--api-url", help="https://HOST/api/v1")],
    event_name: Annotated[str | None, typer.Option("--event-name")] = None,
    token_env: Annotated[str, typer.Option("--token-env")] = "GITEA_TOKEN",
    bot_login: Annotated[str, typer.Option("--bot-login")] = "triage-bot",
    dry_run: Annotated[bool, typer.Option("--dry-run")] = False,
) -> None:
    """Same for Gitea/Forgejo Actions (or any runner given the event payload file)."""
    _run_event("gitea", event, event_name, api_url, token_env, bot_login, dry_run)


@serve_app.command()
def serve(
    forge: Annotated[str, typer.Option("--forge", help="github, gitea or forgejo")] = "github",
    api_url: Annotated[str, typer.Option("--api-url")] = "https://api.github.com",
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8080,
    secret_env: Annotated[str, typer.Option("--secret-env")] = "TRIAGE_WEBHOOK_SECRET",
    token_env: Annotated[str, typer.Option("--token-env")] = "TRIAGE_FORGE_TOKEN",
    bot_login: Annotated[
        str, typer.Option("--bot-login", help="Default: asked from the forge")
    ] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run")] = False,
    max_body_mib: Annotated[int, typer.Option("--max-body-mib")] = 25,
    writes_per_minute: Annotated[int, typer.Option("--writes-per-minute")] = 20,
    writes_per_hour: Annotated[int, typer.Option("--writes-per-hour")] = 300,
    deliveries_per_minute: Annotated[
        int, typer.Option("--deliveries-per-minute", help="Queued per repository a minute")
    ] = 120,
    sender_deliveries_per_minute: Annotated[
        int, typer.Option("--sender-deliveries-per-minute", help="Queued per sender a minute")
    ] = 30,
    queue_size: Annotated[int, typer.Option("--queue-size", help="Jobs waiting, then 503")] = 1000,
    backlog: Annotated[int, typer.Option("--backlog", help="Listen backlog")] = 1024,
    http_threads: Annotated[
        int, typer.Option("--http-threads", help="Threads answering complete requests")
    ] = 4,
    max_connections: Annotated[
        int, typer.Option("--max-connections", help="Open connections, then 503")
    ] = 256,
    header_timeout: Annotated[
        float, typer.Option("--header-timeout", help="Seconds to send the headers")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option("--body-timeout", help="Seconds to send the body")
    ] = 30.0,
) -> None:
    """Serve webhooks (POST /) until interrupted; the work runs from a queue."""
    from triage.bot.respond import IssueBot
    from triage.bot.webhook import WebhookServer

    secret = os.environ.get(secret_env, "").encode()
    if not secret:
        raise _fail(f"no webhook secret: set the environment variable {secret_env}")
    client = _forge(forge, api_url, token_env, dry_run, writes_per_minute, writes_per_hour)
    if not bot_login and not isinstance(client, _OfflineForge):
        bot_login = client.whoami()
    if not bot_login:
        raise _fail("cannot tell the bot's own login: pass --bot-login")
    bot = IssueBot(_engine(), client, bot_login, dry_run=dry_run, echo=typer.echo)
    try:
        server = WebhookServer(
            bot.handle,
            secret,
            host=host,
            port=port,
            bot_login=bot_login,
            max_body=max_body_mib << 20,
            per_minute=deliveries_per_minute,
            sender_per_minute=sender_deliveries_per_minute,
            queue_size=queue_size,
            backlog=backlog,
            http_threads=http_threads,
            max_connections=max_connections,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            log=lambda m: typer.echo(m, err=True),
        )
    except (ValueError, OSError) as exc:  # a limit below 1, or the port is taken
        raise _fail(f"cannot serve: {exc}") from None
    typer.echo(
        f"triage serve: listening on {server.url} as {bot_login}{' (dry run)' if dry_run else ''}",
        err=True,
    )
    server.start()
    try:
        while True:
            server._threads[0].join(timeout=1.0)
    except KeyboardInterrupt:
        server.stop()


@run_app.command()
def run(
    run_dir: Annotated[Path, typer.Argument(help="The run directory")],
    write: Annotated[
        bool, typer.Option("--write/--no-write", help="Write triage.md and triage.json")
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing")] = False,
    history_db: Annotated[
        Path | None, typer.Option("--history-db", help="Record the (redacted) report here")
    ] = None,
) -> None:
    """Triage one run directory (server log, launch command, client output, bench JSON, dmesg)."""
    from triage.bot.rundir import triage_run

    if not run_dir.is_dir():
        raise _fail(f"{run_dir}: not a directory")
    result = triage_run(_engine(), run_dir, write=write, history_db=history_db)
    if not quiet:
        sys.stdout.write(result.diagnosis.markdown)
        for path in result.written:
            typer.echo(f"wrote {path}", err=True)
    raise typer.Exit(EXIT_FAILURE if result.failed else EXIT_OK)


@watch_app.command()
def watch(
    root: Annotated[Path, typer.Argument(help="Results tree to follow")],
    interval: Annotated[float, typer.Option("--interval", help="Seconds between scans")] = 10.0,
    settle: Annotated[
        float, typer.Option("--settle", help="Quiet seconds that mean a run ended")
    ] = 60.0,
    once: Annotated[bool, typer.Option("--once", help="Scan once and exit")] = False,
    webhook_url: Annotated[
        str | None,
        typer.Option("--webhook-url", help="POST a JSON summary of each failed run here"),
    ] = None,
    forge: Annotated[
        str | None, typer.Option("--forge", help="Post to an issue: github|gitea")
    ] = None,
    api_url: Annotated[str, typer.Option("--api-url")] = "https://api.github.com",
    repo: Annotated[str | None, typer.Option("--repo", help="owner/name of the issue")] = None,
    issue: Annotated[int | None, typer.Option("--issue", help="Issue number to comment on")] = None,
    token_env: Annotated[str, typer.Option("--token-env")] = "TRIAGE_FORGE_TOKEN",
    bot_login: Annotated[str, typer.Option("--bot-login")] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run")] = False,
    history_db: Annotated[
        Path | None, typer.Option("--history-db", help="Record each (redacted) report here")
    ] = None,
) -> None:
    """Triage each run under ROOT that finishes with a failure (triage.md + triage.json)."""
    from triage.bot.rundir import RunResult
    from triage.bot.sticky import publish
    from triage.bot.watch import Watcher, post_webhook

    if not root.is_dir():
        raise _fail(f"{root}: not a directory")
    notifiers: list[Callable[[RunResult], object]] = []
    if webhook_url:
        if not webhook_url.startswith(("https://", "http://")):
            raise _fail("--webhook-url must be an http(s) URL")
        url = webhook_url
        notifiers.append(lambda r: post_webhook(url, r))
    if forge:
        if not repo or not issue:
            raise _fail("--forge needs --repo and --issue")
        client = _forge(forge, api_url, token_env, dry_run)
        login = bot_login or ("" if isinstance(client, _OfflineForge) else client.whoami())
        if not login and not dry_run:
            raise _fail("cannot tell the bot's own login: pass --bot-login")
        repo_s, issue_n = repo, issue
        notifiers.append(
            lambda r: publish(
                client,
                repo_s,
                issue_n,
                r.diagnosis.markdown,
                bot_login=login,
                dry_run=dry_run,
                echo=typer.echo,
            )
        )

    def notify(result: RunResult) -> None:
        for n in notifiers:
            n(result)

    watcher = Watcher(
        _engine(),
        root,
        settle=settle,
        notify=notify if notifiers else None,
        echo=typer.echo,
        history_db=history_db,
    )
    with contextlib.suppress(KeyboardInterrupt):
        watcher.run(interval=interval, once=once)
    raise typer.Exit(EXIT_OK)
