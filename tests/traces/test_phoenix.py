"""Runs' traces as a real collector (Arize Phoenix) receives them: live over OTLP/HTTP,
and the offline file sent afterwards with `awf trace --send`."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

from awf_nb.runs import prepare_run
from awf_nb.traces import TRACE_FILE
from awf_nb.traces.otlp_json import decode
from tests.support.phoenix import Phoenix
from tests.support.waiting import poll

WORKFLOW = """
name: notes
inputs:
  - name: token
    secret: true
states:
  initial: work
  work:
    type: agent
    provider: scripted
    mode: conversation
    prompt: "Read the notes. key {{.inputs.token}}"
    tools: {builtin: [Read]}
    options:
      replies:
        - text: "Reading."
          tool_calls: [{name: Read, arguments: {file_path: notes.txt}}]
        - "The notes say: buy milk."
        - "ok bye"
    on_success: done
  done: {type: terminal}
"""
SECRET = "SEKRET-4242-token"


async def _run(tmp_path: Path, **options) -> str:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    prepared = prepare_run(
        tmp_path / "wf.yaml",
        inputs={"token": SECRET},
        replies=["hello", ""],
        storage=tmp_path / "store",
        cwd=tmp_path,
        env={},
        **options,
    )
    result = await prepared.run()
    assert result.status == "completed"
    return prepared.run_id


def _trace(tmp_path: Path, run_id: str) -> list:
    return list(decode((tmp_path / "store" / "runs" / run_id / TRACE_FILE).open()))


def _received(phoenix: Phoenix, trace_id: str, count: int) -> list[dict]:
    found: list[dict] = []

    def arrived() -> bool:
        found[:] = phoenix.spans(trace_id)
        return len(found) >= count

    assert poll(arrived, 30, 0.2), f"Phoenix got {len(found)} of {count} spans"
    return found


async def test_a_conversation_with_a_tool_call_is_one_trace_in_phoenix(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    run_id = await _run(tmp_path, otlp=phoenix.url)
    spans = _trace(tmp_path, run_id)
    got = _received(phoenix, spans[0].trace_id, len(spans))
    by_name = {s["name"]: s for s in got}
    run = by_name["invoke_workflow notes"]
    agent = by_name["invoke_agent work"]
    tool = by_name["execute_tool Read"]
    chats = sorted((s for s in got if s["name"] == "chat"), key=lambda s: s["start_time"])
    assert run["parent_id"] is None
    assert agent["parent_id"] == run["context"]["span_id"]
    assert tool["parent_id"] == agent["context"]["span_id"]
    assert len(chats) == 3
    assert all(c["parent_id"] == agent["context"]["span_id"] for c in chats)
    attrs = chats[0]["attributes"]
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.conversation.id"] == run_id
    assert attrs["gen_ai.usage.input_tokens"] > 0
    assert attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert tool["attributes"]["gen_ai.tool.name"] == "Read"
    assert run["attributes"]["gen_ai.workflow.name"] == "notes"
    # no contents without the opt-in
    text = json.dumps(got)
    assert "gen_ai.input.messages" not in text and "buy milk" not in text
    assert SECRET not in text


async def test_contents_on_opt_in_are_masked(phoenix: Phoenix, tmp_path: Path) -> None:
    run_id = await _run(tmp_path, otlp=phoenix.url, trace_content=True)
    spans = _trace(tmp_path, run_id)
    got = _received(phoenix, spans[0].trace_id, len(spans))
    text = json.dumps(got)
    assert "buy milk" in text and "gen_ai.input.messages" in text
    assert "Read the notes. key ***" in text
    assert SECRET not in text
    assert SECRET not in (tmp_path / "store" / "runs" / run_id / TRACE_FILE).read_text()


async def test_a_dead_collector_costs_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:  # a closed port: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with caplog.at_level(logging.WARNING):
        run_id = await _run(tmp_path, otlp=f"http://127.0.0.1:{port}")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "did not reach the OTLP collector" in warnings[0].getMessage()
    assert _trace(tmp_path, run_id)  # the file is still written


async def test_the_offline_file_sent_later_is_the_same_trace(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    from awf_nb.frontends.cli import main

    run_id = await _run(tmp_path)  # offline: no collector
    spans = _trace(tmp_path, run_id)
    assert not phoenix.spans(spans[0].trace_id)
    assert main(["trace", run_id, "--storage", str(tmp_path / "store"), "--send", phoenix.url]) == 0
    got = _received(phoenix, spans[0].trace_id, len(spans))
    assert {s["context"]["span_id"] for s in got} == {s.span_id for s in spans}
    sent = {s.span_id: s for s in spans}
    for span in got:
        mine = sent[span["context"]["span_id"]]
        assert span["name"] == mine.name
        for key, value in mine.attributes.items():
            assert span["attributes"][key] == value, key
    out = tmp_path / "out.jsonl"
    assert main(["trace", run_id[:12], "--storage", str(tmp_path / "store"), "-o", str(out)]) == 0
    assert [s.span_id for s in decode(out.open())] == [s.span_id for s in spans]


async def test_an_eval_of_three_cases_and_two_variants_tags_each_run(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.evals.api import prepare_eval
    from tests.support.eval_project import CHAT_WORKFLOW, Project

    project = Project(tmp_path / "project")
    project.root.mkdir()
    monkeypatch.chdir(project.root)
    project.write("wf.yaml", CHAT_WORKFLOW)
    project.rows("cases.jsonl", [{"id": c, "topic": c, "replies": ["exit"]} for c in "abc"])
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        variants:
          plain: {}
          keen: {inputs: {topic: "more {{.case.topic}}"}}
        scorers:
          - name: done
            condition: 'status == "completed"'
        """
    )
    run = prepare_eval(path, storage=project.store, otlp=phoenix.url)
    result = await run.execute()
    assert len(result.rows) == 6
    for row in result.rows:
        spans = list(decode((project.store.run_dir(row.run_id) / TRACE_FILE).open()))
        got = _received(phoenix, spans[0].trace_id, len(spans))
        (top,) = [s for s in got if s["parent_id"] is None]
        assert top["name"] == "invoke_workflow chatty"
        assert top["attributes"]["awf.eval.id"] == result.eval_id
        assert top["attributes"]["awf.eval.case"] == row.case
        assert top["attributes"]["awf.eval.epoch"] == 1
        assert top["attributes"]["awf.eval.variant"] == row.variant
        assert any(s["name"] == "chat" for s in got)
    from awf_nb.frontends.cli import main

    out = tmp_path / "eval.jsonl"
    store = str(project.store.root)
    assert main(["trace", result.eval_id, "--storage", store, "-o", str(out)]) == 0
    assert len({s.trace_id for s in decode(out.open())}) == 6


async def test_an_evals_pricing_is_the_cost_on_its_spans(
    phoenix: Phoenix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from awf_nb.evals.api import prepare_eval
    from awf_nb.evals.pricing import usd
    from tests.support.eval_project import CHAT_WORKFLOW, Project

    project = Project(tmp_path / "project")
    project.root.mkdir()
    monkeypatch.chdir(project.root)
    project.write("wf.yaml", CHAT_WORKFLOW)
    project.rows(
        "cases.jsonl", [{"id": c, "topic": c * 40, "replies": ["more", "exit"]} for c in "ab"]
    )
    path = project.write_eval(
        """\
        workflow: wf.yaml
        dataset: cases.jsonl
        inputs: {topic: "{{.case.topic}}"}
        pricing: {scripted: {input: 3, output: 15}}
        scorers:
          - name: done
            condition: 'status == "completed"'
        """
    )
    run = prepare_eval(path, storage=project.store, otlp=phoenix.url)
    result = await run.execute()
    assert len(result.rows) == 2
    for row in result.rows:
        assert row.cost is not None and row.cost > 0
        spans = list(decode((project.store.run_dir(row.run_id) / TRACE_FILE).open()))
        got = _received(phoenix, spans[0].trace_id, len(spans))
        (top,) = [s for s in got if s["parent_id"] is None]
        assert top["attributes"]["awf.usage.cost_usd"] == pytest.approx(row.cost, rel=1e-12)
        assert usd(top["attributes"]["awf.usage.cost_usd"]) == usd(row.cost)  # as the table
        chats = [s["attributes"] for s in got if s["name"] == "chat"]
        assert len(chats) == 2
        for chat in chats:
            tokens = chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]
            assert chat["awf.usage.cost_usd"] == pytest.approx(
                (tokens[0] * 3 + tokens[1] * 15) / 1e6, rel=1e-12
            )
            assert chat["awf.usage.cost_source"] == "pricing"
        # this workflow has no simulated user: its turns add up to the run's cost
        assert sum(c["awf.usage.cost_usd"] for c in chats) == pytest.approx(row.cost)


async def test_a_cost_the_provider_reports_is_on_its_chat_spans(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    reported = WORKFLOW.replace("options:\n", "options:\n      cost_usd: 0.0125\n")
    assert reported != WORKFLOW
    (tmp_path / "notes.txt").write_text("buy milk\n")
    (tmp_path / "wf.yaml").write_text(reported)
    prepared = prepare_run(
        tmp_path / "wf.yaml",
        inputs={"token": SECRET},
        replies=["hello", ""],
        storage=tmp_path / "store",
        cwd=tmp_path,
        env={},
        otlp=phoenix.url,
    )
    assert (await prepared.run()).status == "completed"
    spans = _trace(tmp_path, prepared.run_id)
    got = _received(phoenix, spans[0].trace_id, len(spans))
    chats = [s["attributes"] for s in got if s["name"] == "chat"]
    assert len(chats) == 3
    assert all(c["awf.usage.cost_usd"] == 0.0125 for c in chats)
    assert all(c["awf.usage.cost_source"] == "provider" for c in chats)
    by_name = {s["name"]: s["attributes"] for s in got}
    assert by_name["invoke_agent work"]["awf.usage.cost_usd"] == pytest.approx(3 * 0.0125)
    assert by_name["invoke_workflow notes"]["awf.usage.cost_usd"] == pytest.approx(3 * 0.0125)


async def test_two_runs_in_one_process_share_one_exporter(phoenix: Phoenix, tmp_path: Path) -> None:
    import asyncio
    import threading

    from awf_nb.traces import Tracer

    def flushers() -> int:
        return sum(t.name == "awf-otlp-flush" for t in threading.enumerate())

    before = flushers()
    prepared = []
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "notes.txt").write_text("buy milk\n")
        (folder / "wf.yaml").write_text(WORKFLOW)
        prepared.append(
            prepare_run(
                folder / "wf.yaml",
                inputs={"token": SECRET},
                replies=["hello", ""],
                storage=folder / "store",
                cwd=folder,
                env={},
                otlp=phoenix.url,
            )
        )
    results = await asyncio.gather(*(p.run() for p in prepared))
    assert [r.status for r in results] == ["completed", "completed"]
    sinks = [p.runner.config.sink for p in prepared]
    assert all(isinstance(s, Tracer) for s in sinks)
    exports = {id(s._live._shared) for s in sinks}  # type: ignore[union-attr]
    assert len(exports) == 1  # one exporter, one export thread, one connection
    assert flushers() - before <= 1
    traces = set()
    for p, name in zip(prepared, ("one", "two"), strict=True):
        spans = list(decode((tmp_path / name / "store" / "runs" / p.run_id / TRACE_FILE).open()))
        got = _received(phoenix, spans[0].trace_id, len(spans))
        assert {s["context"]["span_id"] for s in got} == {s.span_id for s in spans}
        traces.add(spans[0].trace_id)
    assert len(traces) == 2
