"""`awf acp` driven by the ACP SDK's own client, `awf acp` in a subprocess."""

from __future__ import annotations

import asyncio
from pathlib import Path

from acp.schema import ToolCallStart

from tests.support.acp_peers import RecordingClient, awf_acp, say


async def test_discovery_lists_workflows_with_inputs(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project) as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        await client.wait_for(lambda: client.commands(session))
        commands = {c.name: c for c in client.commands(session)}
        assert {"echo", "chat", "tooly", "slow"} <= set(commands)
        assert commands["echo"].description == "Say back what you were given"
        assert commands["echo"].input.root.hint == "topic=…"


async def test_single_step_workflow_streams_its_reply_and_steps(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project) as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        response = await say(conn, session, '/echo topic="fresh bread"')
        assert response.stop_reason == "end_turn"
        assert client.text(session) == "About fresh bread"
        steps = [u for u in client.tool_calls(session) if isinstance(u, ToolCallStart)]
        assert [s.tool_call_id for s in steps] == ["step:say"]
        assert client.tool_calls(session)[-1].status == "completed"
        runs = list((project / "store" / "runs").iterdir())
        assert len(runs) == 1  # the session's run is in the store


async def test_conversation_parks_across_three_prompts(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project) as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        first = await say(conn, session, "/chat topic=bread")
        assert first.stop_reason == "end_turn"
        assert client.text(session) == "Let us talk about bread"
        for message in ("rye or wheat?", "and sourdough?"):
            client.clear(session)
            reply = await say(conn, session, message)
            assert reply.stop_reason == "end_turn"
            assert client.text(session) == message  # the scripted model echoes the person
        client.clear(session)
        await say(conn, session, "exit")  # ends the conversation: the run completes
        steps = client.tool_calls(session)
        assert steps[-1].status == "completed"
        # the session is free again: a new command runs
        client.clear(session)
        await say(conn, session, "/echo topic=again")
        assert client.text(session) == "About again"


async def test_permission_allowed_then_denied(project: Path) -> None:
    client = RecordingClient(answers=["allow_once", "deny"])
    async with awf_acp(client, project) as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        await say(conn, session, "/tooly")
        assert len(client.permissions) == 2
        asked = client.permissions[0][1]
        assert asked.raw_input == {
            "tool": "Write",
            "arguments": {"file_path": "marker.txt", "content": "written"},
        }
        assert {o.kind for o in client.permissions[0][2]} >= {"allow_once", "allow_always"}
        assert (project / "marker.txt").read_text() == "written"
        assert not (project / "marker2.txt").exists()
        assert "first done" in client.text(session)


async def test_cancel_stops_the_run_and_keeps_it_resumable(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project) as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        turn = asyncio.ensure_future(say(conn, session, "/slow"))
        await client.wait_for(lambda: client.tool_calls(session))
        await conn.cancel(session_id=session)
        response = await turn
        assert response.stop_reason == "cancelled"
        assert "awf resume" in client.text(session)
        (run,) = (project / "store" / "runs").iterdir()
        assert '"cancelled"' in (run / "state.json").read_text()


async def test_two_sessions_at_once_are_independent(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project) as (conn, _):
        one = (await conn.new_session(cwd=str(project))).session_id
        two = (await conn.new_session(cwd=str(project))).session_id
        slow = asyncio.ensure_future(say(conn, one, "/slow"))
        await client.wait_for(lambda: client.tool_calls(one))
        await say(conn, two, "/chat topic=cheese")  # parks while the other one runs
        assert client.text(two) == "Let us talk about cheese"
        await conn.cancel(session_id=one)
        assert (await slow).stop_reason == "cancelled"
        client.clear(two)
        await say(conn, two, "still here?")
        assert client.text(two) == "still here?"


async def test_bad_prompts_and_inputs_leave_the_session_usable(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project) as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        cases = {
            "/nosuch": "nosuch",
            "/echo": "echo needs topic (what to say): try /echo topic=…",
            '/echo topic="open': "check the quotes",
            "/echo topic": 'invalid input "topic"',
            "hello": "no default workflow",
        }
        for prompt, expected in cases.items():
            client.clear(session)
            response = await say(conn, session, prompt)
            assert response.stop_reason == "end_turn"
            assert client.text(session).startswith("error: "), prompt
            assert expected in client.text(session), prompt
        client.clear(session)
        await say(conn, session, "/echo topic=fine")
        assert client.text(session) == "About fine"


async def test_plain_prompt_runs_the_default_workflow(project: Path) -> None:
    client = RecordingClient()
    async with awf_acp(client, project, "--default", "chat") as (conn, _):
        session = (await conn.new_session(cwd=str(project))).session_id
        await say(conn, session, "sourdough")
        assert client.text(session) == "Let us talk about sourdough"
