"""The engine bounds every reply (options.max_reply_bytes, 4 MiB by default) and the
openai_compatible provider every event line: a server that never stops ends the turn with
a clear error, keeping the text received."""

from __future__ import annotations

import json

from awf_nb.engine.ports import Final, TextDelta, TurnRequest
from awf_nb.providers.scripted import ScriptedProvider
from tests.support.events import with_providers
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


class OnePiece(ScriptedProvider):
    """A provider whose whole (too long) reply arrives as one delta: a fast server whose
    tokens piled up while the engine was busy."""

    async def stream(self, turn: TurnRequest):  # type: ignore[override]
        text = "ab" * 600 + "é" * 1000  # 1,200 ASCII bytes, then 2,000 bytes of "é"
        yield TextDelta(text)
        yield Final(text)


async def test_a_reply_past_the_limit_in_one_piece_keeps_the_text_up_to_the_limit(
    run_yaml,
) -> None:
    text = """
name: t
states:
  initial: ask
  ask: {type: agent, provider: odd, prompt: go, options: {max_reply_bytes: 2001},
        on_success: done}
  done: {type: terminal}
"""
    result = await run_yaml(text, providers=with_providers(odd=OnePiece))
    assert result.status == "failed"
    assert "the reply is longer than 2001 bytes (options.max_reply_bytes)" in result.error
    kept = result.outputs["ask"]
    assert kept == "ab" * 600 + "é" * 400  # 2,000 bytes: half an "é" is not kept
