"""`github.*` operations over GitHub's REST API.

The token comes from `GITHUB_TOKEN` (or `GH_TOKEN`); reads work without one on public
repositories, writes need it. The API address is `GITHUB_API_URL` (set by GitHub Actions
and by GitHub Enterprise users; default https://api.github.com). The repository is the
step's `repo` input, else `GITHUB_REPOSITORY`, else the `origin` remote of the working
directory's git checkout.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from awf_nb.engine.operations.base import (
    Operation,
    OperationContext,
    OperationResult,
    call_operation,
)
from awf_nb.engine.operations.http import Response, fetch
from awf_nb.engine.process import run_process
from awf_nb.errors import ExecutionError

DEFAULT_API = "https://api.github.com"
GIT_SECONDS = 10  # `git remote get-url origin` reads a file: it has no reason to take long
_REMOTE = re.compile(r"github\.com[:/](?P<repo>[^/\s]+/[^/\s]+?)(?:\.git)?/?$")
_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")


class _GitHub:
    """One operation's view of the API: address, token, repository."""

    def __init__(self, operation: str, inputs: dict[str, Any], context: OperationContext):
        self.operation = operation
        env = context.env
        self.api = (env.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/")
        self.token = (env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or "").strip()
        self._repo_input = inputs.get("repo") or ""
        self._context = context

    async def repo(self) -> str:
        repo = self._repo_input or self._context.env.get("GITHUB_REPOSITORY", "")
        if not repo:
            repo = await _origin_repo(self._context)
        if not repo:
            raise ExecutionError(
                f"{self.operation}: which repository? Set the step's repo input (owner/name), "
                "GITHUB_REPOSITORY, or run inside a git checkout whose origin is on GitHub"
            )
        if not _REPO.match(repo):
            raise ExecutionError(f"{self.operation}: repo must be owner/name, got {repo!r}")
        return repo

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "awf-nb",
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        response = await fetch(
            self.operation, method, self.api + path, headers=headers, json_body=body
        )
        if response.status_code >= 400:
            raise ExecutionError(self._failure(method, path, response))
        return response.json()

    def _failure(self, method: str, path: str, response: Response) -> str:
        answer = response.json()
        message = answer.get("message", "") if isinstance(answer, dict) else response.body[:200]
        for error in answer.get("errors", []) if isinstance(answer, dict) else []:
            if isinstance(error, dict) and error.get("message"):
                message += f" ({error['message']})"
        text = (
            f"{self.operation}: GitHub answered {response.status_code} {response.reason} "
            f"to {method} {path}" + (f": {message}" if message else "")
        )
        if response.status_code in (401, 403, 404) and not self.token:
            text += " (no GITHUB_TOKEN is set: private repositories and writes need one)"
        return text


async def _origin_repo(context: OperationContext) -> str:
    """The `owner/name` of the working directory's `origin` remote on GitHub, "" if none."""
    try:
        done = await run_process(
            ["git", "remote", "get-url", "origin"],
            cwd=context.cwd,
            env=context.env,
            timeout=GIT_SECONDS,
        )
    except OSError:  # no git
        return ""
    if done.exit_code != 0 or done.timed_out:
        return ""
    match = _REMOTE.search(done.stdout.strip())
    return match.group("repo") if match else ""


def _labels(item: dict[str, Any]) -> list[str]:
    return [label["name"] if isinstance(label, dict) else str(label) for label in item["labels"]]


def _only(outputs: dict[str, Any], fields: list[Any] | None) -> dict[str, Any]:
    if not fields:
        return outputs
    wanted = {str(f) for f in fields}
    return {k: v for k, v in outputs.items() if k in wanted}


async def get_issue(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.get_issue", inputs, context)
    issue = await gh.call("GET", f"/repos/{await gh.repo()}/issues/{inputs['number']}")
    outputs = {
        "number": issue["number"],
        "title": issue["title"],
        "body": issue.get("body") or "",
        "state": issue["state"],
        "labels": _labels(issue),
        "url": issue.get("html_url", ""),
    }
    return OperationResult(_only(outputs, inputs.get("fields")))


async def get_pr(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.get_pr", inputs, context)
    pr = await gh.call("GET", f"/repos/{await gh.repo()}/pulls/{inputs['number']}")
    outputs = {
        "number": pr["number"],
        "title": pr["title"],
        "body": pr.get("body") or "",
        "state": pr["state"],
        "headRefName": pr["head"]["ref"],
        "baseRefName": pr["base"]["ref"],
        "mergeable": pr.get("mergeable"),
        "mergedAt": pr.get("merged_at") or "",
        "labels": _labels(pr),
        "url": pr.get("html_url", ""),
    }
    return OperationResult(_only(outputs, inputs.get("fields")))


async def create_issue(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.create_issue", inputs, context)
    body: dict[str, Any] = {"title": inputs["title"], "body": inputs.get("body", "")}
    for key in ("labels", "assignees"):
        if inputs.get(key):
            body[key] = [str(v) for v in inputs[key]]
    issue = await gh.call("POST", f"/repos/{await gh.repo()}/issues", body)
    return OperationResult({"number": issue["number"], "url": issue.get("html_url", "")})


async def create_pr(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.create_pr", inputs, context)
    repo = await gh.repo()
    body = {
        "title": inputs["title"],
        "head": inputs["head"],
        "base": inputs["base"],
        "body": inputs.get("body", ""),
        "draft": bool(inputs.get("draft")),
    }
    try:
        pr = await gh.call("POST", f"/repos/{repo}/pulls", body)
    except ExecutionError as exc:
        if "already exists" not in str(exc):
            raise
        # A pull request for this branch is open already: report it, as AWF does.
        owner = repo.split("/")[0]
        query = f"state=open&head={owner}:{inputs['head']}"
        found = await gh.call("GET", f"/repos/{repo}/pulls?{query}")
        if not found:
            raise
        pr = found[0]
        return OperationResult(
            {"number": pr["number"], "url": pr.get("html_url", ""), "already_exists": True}
        )
    return OperationResult(
        {"number": pr["number"], "url": pr.get("html_url", ""), "already_exists": False}
    )


async def add_labels(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.add_labels", inputs, context)
    labels = [str(v) for v in inputs["labels"]]
    answer = await gh.call(
        "POST", f"/repos/{await gh.repo()}/issues/{inputs['number']}/labels", {"labels": labels}
    )
    return OperationResult({"labels": [label["name"] for label in answer]})


async def list_comments(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.list_comments", inputs, context)
    answer = await gh.call(
        "GET", f"/repos/{await gh.repo()}/issues/{inputs['number']}/comments?per_page=100"
    )
    comments = [
        {
            "id": c["id"],
            "author": (c.get("user") or {}).get("login", ""),
            "body": c.get("body") or "",
            "created_at": c.get("created_at", ""),
            "url": c.get("html_url", ""),
        }
        for c in answer
    ]
    limit = inputs.get("limit")
    if limit:
        comments = comments[-int(limit) :]
    return OperationResult({"comments": comments, "total": len(comments)})


async def add_comment(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    gh = _GitHub("github.add_comment", inputs, context)
    comment = await gh.call(
        "POST",
        f"/repos/{await gh.repo()}/issues/{inputs['number']}/comments",
        {"body": inputs["body"]},
    )
    return OperationResult({"comment_id": comment["id"], "url": comment.get("html_url", "")})


_STRATEGIES = ("all_succeed", "any_succeed", "best_effort")


async def batch(inputs: dict[str, Any], context: OperationContext) -> OperationResult:
    """Several github operations, `concurrency` at a time; results in the given order."""
    strategy = inputs["strategy"]
    if strategy not in _STRATEGIES:
        raise ExecutionError(
            f"github.batch: strategy must be one of {', '.join(_STRATEGIES)}, got {strategy!r}"
        )
    gate = asyncio.Semaphore(max(1, int(inputs["concurrency"])))

    async def one(item: Any) -> dict[str, Any]:
        if not isinstance(item, dict) or not str(item.get("name", "")).startswith("github."):
            return {"name": "", "status": "failed", "error": "each item needs name: github.<op>"}
        name = item["name"]
        if name == "github.batch":
            return {"name": name, "status": "failed", "error": "a batch cannot contain a batch"}
        item_inputs = {k: v for k, v in item.items() if k != "name"}
        async with gate:
            try:
                result = await call_operation(name, OPERATIONS, item_inputs, context)
            except ExecutionError as exc:
                return {"name": name, "status": "failed", "error": exc.message}
        if result.error:
            return {"name": name, "status": "failed", "error": result.error}
        return {"name": name, "status": "completed", "outputs": result.outputs}

    results = await asyncio.gather(*(one(item) for item in inputs["operations"]))
    failed = sum(1 for r in results if r["status"] == "failed")
    outputs = {
        "total": len(results),
        "succeeded": len(results) - failed,
        "failed": failed,
        "results": list(results),
    }
    error = None
    if strategy == "all_succeed" and failed:
        error = f"github.batch: {failed} of {len(results)} operations failed"
    elif strategy == "any_succeed" and results and failed == len(results):
        error = f"github.batch: all {len(results)} operations failed"
    return OperationResult(outputs, error)


OPERATIONS: dict[str, Operation] = {
    "github.get_issue": get_issue,
    "github.get_pr": get_pr,
    "github.create_issue": create_issue,
    "github.create_pr": create_pr,
    "github.add_labels": add_labels,
    "github.list_comments": list_comments,
    "github.add_comment": add_comment,
    "github.batch": batch,
}
