"""`type: operation` steps: http.request, github.* and notify.send against local servers,
and the load-time checks of operation names and inputs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from awf_nb.api import load
from awf_nb.engine.operations.http import MAX_BODY_BYTES
from awf_nb.errors import DefinitionError
from tests.support.http_server import Answer, FakeHttpServer
from tests.support.waiting import free_port


@pytest.fixture
def server():
    with FakeHttpServer() as fake:
        yield fake


def one_step(operation: str, inputs: str, extra: str = "") -> str:
    return f"""
name: op
states:
  initial: call
  call:
    type: operation
    operation: {operation}
    inputs:
{inputs}
{extra}    on_success: done
    on_failure: failed
  done: {{type: terminal, message: "{{{{.states.call.Output}}}}"}}
  failed: {{type: terminal, status: failure, message: "{{{{.states.call.Error}}}}"}}
"""


def http_step(server: FakeHttpServer, path: str, **inputs: object) -> str:
    lines = [f"      url: {server.url}{path}"]
    lines += [f"      {k}: {json.dumps(v)}" for k, v in {"method": "GET", **inputs}.items()]
    return one_step("http.request", "\n".join(lines))


# --- load time --------------------------------------------------------------------------------


def test_an_unknown_operation_is_a_load_error_listing_the_known_ones():
    with pytest.raises(DefinitionError) as caught:
        load(one_step("http.reqest", "      url: http://127.0.0.1/"))
    message = str(caught.value)
    assert 'unknown operation "http.reqest": did you mean "http.request"?' in message
    assert "known operations: http.request, github.get_issue" in message
    assert "notify.send" in message
    assert "states.call" in message or ":7:" in message  # points into the file


def test_a_missing_required_input_and_an_unknown_one_are_load_errors():
    with pytest.raises(DefinitionError) as caught:
        load(one_step("http.request", "      url: http://127.0.0.1/\n      methd: GET"))
    message = str(caught.value)
    assert 'operation http.request: input "method" is required' in message
    assert 'unknown input "methd" (did you mean "method"?)' in message


def test_awf_spelling_operation_inputs_is_accepted():
    text = one_step("notify.send", "      backend: webhook").replace(
        "    inputs:\n      backend: webhook",
        "    operation_inputs: {backend: webhook, message: hi}",
    )
    step = load(text).steps["call"]
    assert step.inputs == {"backend": "webhook", "message": "hi"}


# --- http.request -----------------------------------------------------------------------------


async def test_http_get_sets_response_and_output(run_yaml, server):
    server.route("GET", "/status", Answer(200, {"ok": True}, {"X-Build": "42"}))
    result = await run_yaml(http_step(server, "/status"))
    assert result.ok, result.error
    response = result.steps["call"].response
    assert response["status_code"] == 200
    assert json.loads(response["body"]) == {"ok": True}
    assert response["headers"]["x-build"] == "42"
    assert response["body_truncated"] is False
    assert json.loads(result.outputs["call"]) == response


async def test_http_post_sends_headers_and_body_and_routes_on_status(run_yaml, server):
    server.route("POST", "/items", Answer(201, {"id": 7}))
    text = (
        http_step(
            server, "/items", method="post", headers={"X-Team": "docs"}, body='{"name": "x"}'
        ).replace(
            "    on_success: done\n",
            "    transitions:\n"
            "      - {when: 'states.call.Response.status_code == 201', goto: created}\n"
            "      - {goto: done}\n",
        )
        + '  created: {type: terminal, message: "created"}\n'
    )
    result = await run_yaml(text)
    assert result.message == "created"
    (seen,) = server.requests
    assert seen.method == "POST"
    assert seen.headers["x-team"] == "docs"
    assert seen.json() == {"name": "x"}


async def test_http_an_error_status_is_still_a_response(run_yaml, server):
    server.route("GET", "/missing", Answer(404, "no such page"))
    result = await run_yaml(http_step(server, "/missing"))
    assert result.ok
    assert result.steps["call"].response["status_code"] == 404
    assert result.steps["call"].response["body"] == "no such page"


async def test_http_retryable_status_fails_the_step_so_retry_tries_again(run_yaml, server):
    server.route("GET", "/flaky", Answer(503, "busy"), Answer(200, "fine"))
    text = http_step(server, "/flaky", retryable_status_codes=[503]).replace(
        "    on_success: done\n",
        "    retry: {max_attempts: 3, initial_delay: 0}\n    on_success: done\n",
    )
    result = await run_yaml(text)
    assert result.ok, result.error
    assert result.steps["call"].attempt == 2
    assert result.steps["call"].response["body"] == "fine"


async def test_http_retryable_status_without_retry_fails_with_the_status(run_yaml, server):
    server.route("GET", "/down", Answer(503, "busy"))
    result = await run_yaml(http_step(server, "/down", retryable_status_codes="502, 503"))
    assert result.status == "failed"
    assert result.message == "http.request: retryable status code 503"
    assert result.steps["call"].response["body"] == "busy"  # the outputs are kept


async def test_http_a_refused_connection_is_a_clear_step_error(run_yaml):
    port = free_port()  # nothing listens there
    text = one_step("http.request", f"      url: http://127.0.0.1:{port}/x\n      method: GET")
    result = await run_yaml(text)
    assert result.status == "failed"
    assert result.message.startswith(f"http.request: GET http://127.0.0.1:{port}/x: ")


async def test_http_a_huge_body_is_cut_at_one_mebibyte(run_yaml, server):
    server.route("GET", "/big", Answer(200, b"x" * (MAX_BODY_BYTES + 5000)))
    result = await run_yaml(http_step(server, "/big"))
    response = result.steps["call"].response
    assert response["body_truncated"] is True
    assert len(response["body"]) == MAX_BODY_BYTES


async def test_http_bad_input_types_name_the_input(run_yaml, server):
    result = await run_yaml(http_step(server, "/", timeout="soon"))
    assert result.status == "failed"
    assert (
        result.message == "operation http.request: input \"timeout\" must be an integer, got 'soon'"
    )


async def test_http_a_bad_method_and_a_bad_url_are_clear_errors(run_yaml, server):
    result = await run_yaml(http_step(server, "/", method="BREW"))
    assert "http.request: method must be one of GET, POST" in result.message
    text = one_step("http.request", "      url: ftp://127.0.0.1/\n      method: GET")
    result = await run_yaml(text)
    assert (
        result.message
        == "http.request: url must start with http:// or https://, got 'ftp://127.0.0.1/'"
    )


async def test_http_a_secret_in_the_response_is_masked(run_yaml, server):
    server.route("GET", "/echo", Answer(200, "token=s3cret-value-123"))
    text = http_step(server, "/echo", headers={"Authorization": "Bearer {{.env.API_TOKEN}}"})
    result = await run_yaml(text, env={**os.environ, "API_TOKEN": "s3cret-value-123"})
    assert result.ok
    assert "s3cret" not in result.outputs["call"]
    assert result.steps["call"].response["body"] == "token=***"
    assert server.requests[0].headers["authorization"] == "Bearer s3cret-value-123"


# --- github.* -----------------------------------------------------------------------------------


def github_env(server: FakeHttpServer, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "GITHUB_API_URL": server.url,
        "GITHUB_TOKEN": "ghp_testtoken123",
        "GITHUB_REPOSITORY": "octo/demo",
        **extra,
    }


ISSUE = {
    "number": 5,
    "title": "Crash on start",
    "body": "It crashes.",
    "state": "open",
    "labels": [{"name": "bug"}, {"name": "p1"}],
    "html_url": "https://github.test/octo/demo/issues/5",
}


async def test_github_get_issue(run_yaml, server):
    server.route("GET", "/repos/octo/demo/issues/5", Answer(200, ISSUE))
    text = one_step("github.get_issue", '      number: "{{.inputs.n}}"').replace(
        "states:", "inputs: [{name: n, type: integer}]\nstates:"
    )
    result = await run_yaml(text, inputs={"n": 5}, env=github_env(server))
    assert result.ok, result.error
    assert result.steps["call"].response == {
        "number": 5,
        "title": "Crash on start",
        "body": "It crashes.",
        "state": "open",
        "labels": ["bug", "p1"],
        "url": "https://github.test/octo/demo/issues/5",
    }
    (seen,) = server.requests
    assert seen.headers["authorization"] == "Bearer ghp_testtoken123"
    assert seen.headers["accept"] == "application/vnd.github+json"
    assert "ghp_testtoken123" not in result.outputs["call"]


async def test_github_fields_limit_the_outputs(run_yaml, server):
    server.route("GET", "/repos/octo/demo/issues/5", Answer(200, ISSUE))
    text = one_step("github.get_issue", "      number: 5\n      fields: [title, state]")
    result = await run_yaml(text, env=github_env(server))
    assert result.steps["call"].response == {"title": "Crash on start", "state": "open"}


async def test_github_get_pr_maps_the_rest_fields(run_yaml, server):
    pr = {**ISSUE, "head": {"ref": "fix"}, "base": {"ref": "main"}, "mergeable": True,
          "merged_at": None}  # fmt: skip
    server.route("GET", "/repos/octo/demo/pulls/5", Answer(200, pr))
    result = await run_yaml(one_step("github.get_pr", "      number: 5"), env=github_env(server))
    response = result.steps["call"].response
    assert (response["headRefName"], response["baseRefName"]) == ("fix", "main")
    assert response["mergeable"] is True and response["mergedAt"] == ""


async def test_github_create_issue_and_comment_send_the_right_bodies(run_yaml, server):
    server.route("POST", "/repos/octo/demo/issues", Answer(201, {"number": 9, "html_url": "u9"}))
    server.route(
        "POST", "/repos/octo/demo/issues/9/comments", Answer(201, {"id": 77, "html_url": "c77"})
    )
    text = """
name: gh
states:
  initial: open
  open:
    type: operation
    operation: github.create_issue
    inputs: {title: Flaky test, body: "Seen twice", labels: "ci, flaky", repo: octo/demo}
    on_success: note
  note:
    type: operation
    operation: github.add_comment
    inputs: {number: "{{.states.open.Response.number}}", body: "Tracking it."}
    on_success: done
  done: {type: terminal, message: "{{.states.note.Response.url}}"}
"""
    result = await run_yaml(text, env=github_env(server))
    assert result.ok, result.error
    assert result.message == "c77"
    create, comment = server.requests
    assert create.json() == {"title": "Flaky test", "body": "Seen twice", "labels": ["ci", "flaky"]}
    assert comment.path == "/repos/octo/demo/issues/9/comments"
    assert comment.json() == {"body": "Tracking it."}


async def test_github_create_pr_reports_an_existing_one(run_yaml, server):
    server.route(
        "POST",
        "/repos/octo/demo/pulls",
        Answer(422, {"message": "Validation Failed",
                     "errors": [{"message": "A pull request already exists for octo:fix."}]}),
    )  # fmt: skip
    server.route(
        "GET",
        "/repos/octo/demo/pulls?state=open&head=octo:fix",
        Answer(200, [{"number": 3, "html_url": "pr3"}]),
    )
    text = one_step("github.create_pr", "      title: Fix\n      head: fix\n      base: main")
    result = await run_yaml(text, env=github_env(server))
    assert result.ok, result.error
    assert result.steps["call"].response == {"number": 3, "url": "pr3", "already_exists": True}
    assert server.requests[0].json()["draft"] is False


async def test_github_an_error_answer_names_status_path_and_message(run_yaml, server):
    text = one_step("github.get_issue", "      number: 404")
    result = await run_yaml(text, env=github_env(server))
    assert result.status == "failed"
    assert result.message == (
        "github.get_issue: GitHub answered 404 Not Found to GET /repos/octo/demo/issues/404: "
        "Not Found"
    )


async def test_github_without_a_token_says_so_on_refusal(run_yaml, server):
    env = github_env(server)
    del env["GITHUB_TOKEN"]
    env.pop("GH_TOKEN", None)
    result = await run_yaml(one_step("github.get_issue", "      number: 1"), env=env)
    assert "no GITHUB_TOKEN is set" in result.message
    assert "authorization" not in server.requests[0].headers


async def test_github_repo_comes_from_the_git_remote(run_yaml, server, workdir):
    subprocess.run(["git", "init", "-q"], cwd=workdir, check=True)
    subprocess.run(
        ["git", "remote", "add", "origin", "git@github.com:octo/from-remote.git"],
        cwd=workdir,
        check=True,
    )
    server.route("GET", "/repos/octo/from-remote/issues/5", Answer(200, ISSUE))
    env = github_env(server)
    del env["GITHUB_REPOSITORY"]
    result = await run_yaml(one_step("github.get_issue", "      number: 5"), env=env)
    assert result.ok, result.error


async def test_github_no_repository_is_a_clear_error(run_yaml, server):
    env = github_env(server)
    del env["GITHUB_REPOSITORY"]
    result = await run_yaml(one_step("github.get_issue", "      number: 5"), env=env)
    assert result.message.startswith("github.get_issue: which repository?")


@pytest.mark.parametrize(
    ("strategy", "ok"), [("best_effort", True), ("all_succeed", False), ("any_succeed", True)]
)
async def test_github_batch_strategies(run_yaml, server, strategy, ok):
    for number in (1, 2):
        server.route(
            "POST", f"/repos/octo/demo/issues/{number}/labels", Answer(200, [{"name": "triage"}])
        )
    items = "\n".join(
        f"        - {{name: github.add_labels, number: {n}, labels: [triage]}}" for n in (1, 404, 2)
    )
    text = one_step("github.batch", f"      strategy: {strategy}\n      operations:\n{items}")
    result = await run_yaml(text, env=github_env(server))
    assert result.ok is ok
    response = result.steps["call"].response
    assert (response["total"], response["succeeded"], response["failed"]) == (3, 2, 1)
    assert [r["status"] for r in response["results"]] == ["completed", "failed", "completed"]
    assert "404 Not Found" in response["results"][1]["error"]
    if not ok:
        assert result.message == "github.batch: 1 of 3 operations failed"


# --- notify.send --------------------------------------------------------------------------------


async def test_notify_webhook_posts_the_message(run_yaml, server):
    server.route("POST", "/hook", Answer(200, "ok"))
    text = one_step(
        "notify.send",
        f"      backend: webhook\n      webhook_url: {server.url}/hook\n"
        "      message: Build finished\n      priority: high",
    )
    result = await run_yaml(text)
    assert result.ok, result.error
    (seen,) = server.requests
    payload = seen.json()
    assert payload["title"] == "AWF Workflow"
    assert payload["message"] == "Build finished"
    assert payload["priority"] == "high"
    assert payload["metadata"]["workflow"] == "op" and payload["metadata"]["step"] == "call"
    assert result.steps["call"].response == {"backend": "webhook", "status": 200, "response": "ok"}


async def test_notify_webhook_non_2xx_fails(run_yaml, server):
    server.route("POST", "/hook", Answer(500, "boom"))
    text = one_step(
        "notify.send",
        f"      backend: webhook\n      webhook_url: {server.url}/hook\n      message: x",
    )
    result = await run_yaml(text)
    assert result.message == "notify.send: the webhook answered 500 Internal Server Error"


def fake_notify_send(folder: Path, record: Path) -> None:
    script = folder / "notify-send"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


async def test_notify_desktop_runs_notify_send(run_yaml, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv"
    fake_notify_send(bin_dir, record)
    text = one_step(
        "notify.send", "      backend: desktop\n      title: Done\n      message: All green"
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = await run_yaml(text, env=env)
    assert result.ok, result.error
    assert record.read_text().splitlines() == [
        "--urgency", "normal", "--app-name", "awf", "Done", "All green",
    ]  # fmt: skip


async def test_notify_desktop_without_notify_send_names_the_package(run_yaml, tmp_path):
    text = one_step("notify.send", "      backend: desktop\n      message: hi")
    result = await run_yaml(text, env={**os.environ, "PATH": str(tmp_path)})
    assert result.status == "failed"
    assert "apt-get install libnotify-bin" in result.message


async def test_notify_an_unknown_backend_is_a_clear_error(run_yaml):
    result = await run_yaml(one_step("notify.send", "      backend: pager\n      message: hi"))
    assert result.message == "notify.send: backend must be desktop or webhook, got 'pager'"


# --- dry run ---------------------------------------------------------------------------------------


def test_dry_run_shows_the_operation_and_its_inputs(server):
    from awf_nb.engine.plan import describe_plan

    text = http_step(server, "/x")
    plan = describe_plan(load(text), {})
    assert "operation: http.request" in plan
    assert f"url: {server.url}/x" in plan
