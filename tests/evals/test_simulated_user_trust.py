"""A simulated user you can trust, played by a model on a real (local, fake) server: its
opener is sent verbatim, only a message that is exactly `exit` ends the conversation, a
defective message is generated again (within `user.retries`), and a simulated user that
keeps failing is a `simulator` error, counted apart from the workflow's own errors."""

from __future__ import annotations

import json

import pytest

import awf_nb
from awf_nb.engine.partner import simulated_user_prompt, simulator_defect
from tests.support.cli import run_awf
from tests.support.eval_project import Project
from tests.support.openai_server import OpenAIServer, Reply


def user_eval(extra: str = "") -> str:
    return f"""\
workflow: wf.yaml
dataset: cases.jsonl
inputs: {{topic: "{{{{.case.topic}}}}"}}
concurrency: 1
user:
  provider: openai_compatible
  options: {{base_url: "{{{{.env.USER_MODEL}}}}", model: user}}
  persona: "You like {{{{.case.topic}}}}"
  max_turns: 4
{extra}scorers:
  - {{name: ended, condition: 'stopped_by == "user_exit"'}}
"""


@pytest.fixture
def user_model(project: Project, monkeypatch: pytest.MonkeyPatch):
    with OpenAIServer(default_reply=Reply.text("exit")) as server:
        monkeypatch.setenv("USER_MODEL", server.base_url)
        project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}])
        yield server


def user_messages(result: awf_nb.EvalResult) -> list[str]:
    state = result.run("a")
    return [t.content for t in state.steps["chat"].conversation.turns if t.role == "user"]


def test_an_empty_message_is_generated_again(project: Project, user_model: OpenAIServer) -> None:
    user_model.script(Reply.text(""), Reply.text("Tell me more, the exit can wait."))
    project.write_eval(user_eval())
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    (row,) = result.rows
    assert row.passed is True and row.stopped_by == "user_exit"
    # the prompt, the regenerated message ("exit" inside a sentence ends nothing), "exit"
    assert user_messages(result)[1:] == ["Tell me more, the exit can wait.", "exit"]
    assert len(user_model.requests) == 3  # empty, again, exit
    # the message generated again is asked from the same history: the empty one forgotten
    assert user_model.requests[1].body["messages"] == user_model.requests[0].body["messages"]


def test_a_simulator_that_keeps_failing_is_a_simulator_error_from_the_command_line(
    project: Project, user_model: OpenAIServer
) -> None:
    user_model.script(Reply.text(""), Reply.text("Assistant: How can I help?"),
                      Reply.text("<think>what now</think> ok"))  # fmt: skip
    project.write_eval(user_eval())
    done = run_awf("eval", "t.eval.yaml", "--json", "--storage", str(project.store.root),
                   cwd=project.root)  # fmt: skip
    assert done.returncode == 3
    data = json.loads(done.stdout)
    (row,) = data["rows"]
    assert row["error_kind"] == "simulator" and row["status"] == "failed"
    assert "simulated user: its message was defective 3 times in a row" in row["error"]
    assert "(last: it held reasoning tags)" in row["error"]
    assert data["summary"]["errors_by_kind"] == {"simulator": 1}


def test_the_opener_is_sent_verbatim_and_desired_turns_is_a_goal(
    project: Project, user_model: OpenAIServer
) -> None:
    project.write_eval(
        user_eval('  opener: "Hi! I bake {{.case.topic}} every day."\n  desired_turns: 2\n')
    )
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    assert user_messages(result)[1:] == ["Hi! I bake bread every day.", "exit"]
    assert len(user_model.requests) == 1  # the opener was not generated
    system = user_model.requests[0].body["messages"][0]["content"]
    assert system == simulated_user_prompt("You like bread", 2)
    assert "within 2 messages" in system


def test_desired_turns_beyond_max_turns_is_refused(project: Project) -> None:
    project.rows("cases.jsonl", [{"id": "a", "topic": "bread"}])
    project.write_eval(user_eval("  desired_turns: 9\n"))
    done = run_awf("validate", "t.eval.yaml", cwd=project.root)
    assert done.returncode != 0
    assert "user.desired_turns (9) is a goal within max_turns (4)" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("text", "defect"),
    [
        ("", "it was empty"),
        ("  \n", "it was empty"),
        ("Assistant: Sure, here is a recipe.", "it was written as the assistant (a role label)"),
        ("**AI:** hello", "it was written as the assistant (a role label)"),
        ("<think>hmm</think>yes", "it held reasoning tags"),
        ("x" * 1001, "it was longer than 1000 characters"),
        ("I want to exit", None),
    ],
)
def test_what_makes_a_message_defective(text: str, defect: str | None) -> None:
    assert simulator_defect(text, 1000) == defect


def test_the_simulated_user_ends_with_a_structured_signal(
    project: Project, user_model: OpenAIServer
) -> None:
    # "exit" inside a sentence ends nothing; the end_conversation call does
    user_model.script(
        Reply.text("I would exit the shop with rye bread."),
        Reply.calls({"name": "end_conversation", "arguments": "{}"}, text="Thanks, bye."),
    )
    project.write_eval(user_eval())
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    (row,) = result.rows
    assert row.passed is True and row.stopped_by == "user_exit" and row.turns == 2
    offered = [t["function"]["name"] for t in user_model.requests[0].body.get("tools", [])]
    assert offered == ["end_conversation"]
    assert user_messages(result)[1:] == ["I would exit the shop with rye bread.", "Thanks, bye."]
    last = result.run("a").steps["chat"].conversation.turns[-1]
    assert last.ended and last.content == "Thanks, bye."


def test_end_tool_false_offers_no_tool_and_exit_still_ends(
    project: Project, user_model: OpenAIServer
) -> None:
    project.write_eval(user_eval("  end_tool: false\n"))
    result = awf_nb.evaluate("t.eval.yaml", storage=project.store, show=False)
    assert result.rows[0].stopped_by == "user_exit"
    assert all("tools" not in r.body for r in user_model.requests)


def test_the_bundled_model_and_agent_clis_are_not_offered_the_tool() -> None:
    from types import SimpleNamespace

    from awf_nb.engine.partner import SimulatedUser, offers_end_tool

    user = SimulatedUser("p")
    assert offers_end_tool(user, SimpleNamespace(name="openai_compatible", session_kind="history"))
    assert not offers_end_tool(user, SimpleNamespace(name="local", session_kind="history"))
    assert not offers_end_tool(user, SimpleNamespace(name="claude", session_kind="session_id"))
    forced = SimulatedUser("p", end_tool=True)
    assert offers_end_tool(forced, SimpleNamespace(name="local", session_kind="history"))
