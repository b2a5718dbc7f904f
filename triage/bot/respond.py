"""Answer one issue end to end: gather its text, triage it, post or edit the one bot comment.

Text comes from the issue body and from the reporter's own comments (bots' comments are skipped),
plus up to `max_attachments` attached `.log`/`.txt` files fetched from the forge. No comment is
posted when the report finds nothing: the bot speaks only when it has something to say.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from triage.api import Engine
from triage.bot.diagnose import TextInput, diagnose
from triage.bot.events import IssueJob, is_bot_user
from triage.bot.forge import Forge
from triage.bot.issue import ParsedIssue, parse_issue
from triage.bot.sticky import publish


@dataclass
class IssueBot:
    engine: Engine
    forge: Forge
    bot_login: str
    dry_run: bool = False
    echo: Callable[[str], None] = print
    max_attachments: int = 3
    outcomes: list[tuple[str, int, str]] = field(default_factory=list)  # (repo, number, action)

    def handle(self, job: IssueJob) -> str:
        """Triage the issue in `job`; returns what was done (created, edited, unchanged, ...)."""
        comments = self.forge.list_comments(job.repo, job.number)
        parsed = parse_issue(job.body, label="issue")
        blocks = list(parsed.blocks)
        env_text = parsed.env_text
        attachments = list(parsed.attachments)
        seen_bodies = {job.body}
        reporter_comments = [
            c.body
            for c in comments
            if c.author.lower() == job.author.lower()
            and not is_bot_user({"login": c.author, "type": c.author_type}, self.bot_login)
        ]
        if job.comment_body and job.comment_body not in reporter_comments:
            reporter_comments.append(job.comment_body)
        for i, body in enumerate(reporter_comments, start=1):
            if body in seen_bodies:
                continue
            seen_bodies.add(body)
            part = parse_issue(body, label=f"comment {i}")
            blocks.extend(part.blocks)
            env_text += part.env_text
            attachments.extend(u for u in part.attachments if u not in attachments)
            parsed.env_section = parsed.env_section or part.env_section
            parsed.images += part.images
        texts = [TextInput(b.name, b.text, b.first_line) for b in blocks]
        for url in attachments[: self.max_attachments]:
            content = self.forge.fetch_attachment(url)
            if content:
                texts.append(TextInput(f"attachment {url.rsplit('/', 1)[-1][:80]}", content))
        merged = ParsedIssue(
            blocks=blocks,
            env_text=env_text,
            env_section=parsed.env_section,
            attachments=attachments,
            images=parsed.images,
        )
        if not texts:
            action = "no log"
        else:
            diag = diagnose(
                self.engine, texts, key=f"{job.repo}#{job.number}", env_text=env_text, parsed=merged
            )
            if not diag.has_findings:
                action = "nothing found"
            else:
                action = publish(
                    self.forge,
                    job.repo,
                    job.number,
                    diag.markdown,
                    bot_login=self.bot_login,
                    dry_run=self.dry_run,
                    echo=self.echo,
                    comments=comments,
                )
        self.outcomes.append((job.repo, job.number, action))
        return action
