"""The engine bounds every reply (options.max_reply_bytes, 4 MiB by default) and the
openai_compatible provider every event line: a server that never stops ends the turn with
a clear error, keeping the text received."""

from __future__ import annotations

import json

from tests.support.openai_server import OpenAIServer, Reply


def agent_step(server: OpenAIServer, **options: object) -> str:
    extra = "".join(f", {k}: {json.dumps(v)}" for k, v in options.items())
    return f"""
name: t
states:
  initial: ask
  ask:
    type: agent
    provider: openai_compatible
    prompt: go
    options: {{base_url: "{server.base_url}", model: m{extra}}}
    on_success: done
  done: {{type: terminal}}
"""


async def test_a_server_that_never_stops_ends_the_turn_keeping_the_text(run_yaml) -> None:
    with OpenAIServer() as server:
        server.script(Reply.counted(50_000))
        result = await run_yaml(agent_step(server, max_reply_bytes=2000))
    assert result.status == "failed"
    assert "the reply is longer than 2000 bytes (options.max_reply_bytes)" in result.error
    kept = result.outputs["ask"]
    assert kept.startswith(" t0 t1 t2") and 1900 < len(kept) <= 2000


async def test_one_endless_data_line_is_a_clean_error(run_yaml) -> None:
    with OpenAIServer() as server:
        server.script(Reply(raw="data: " + "x" * (2 << 20)))
        result = await run_yaml(agent_step(server))
    assert result.status == "failed"
    assert "malformed stream: an event line is longer than 1048576 bytes" in result.error
