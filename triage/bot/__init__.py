"""The pre-reply bot: triage comments on bug reports (GitHub, Gitea, Forgejo) and on failed runs.

One job per module:

- `issue`: read an issue body (sections, fences, `<details>`, `<pre>`, attachments).
- `collect_env`: parse vLLM's `collect_env.py` output into facts.
- `diagnose`: turn text blocks into a Report and the comment to post.
- `forge`: GitHub and Gitea/Forgejo REST clients (comments, attachments) over urllib.
- `ratelimit`: the cap on writes per minute and per hour.
- `sticky`: one comment per thread (find by marker and author, edit when the verdict changed).
- `events`: decide from a webhook/Actions event payload what, if anything, to triage.
- `webhook`: the webhook server (signature check, replay drop, queue and worker).
- `rundir`: triage a benchmark run directory into `triage.md` and `triage.json`.
- `watch`: follow a results tree and triage each run that finishes with a failure.
- `cli`: the `triage comment|bot|serve|run|watch` commands.

Nothing taken from an issue, a log or a webhook is ever executed: it is only data for the
regex engine, the redactor and the Markdown renderer.
"""
