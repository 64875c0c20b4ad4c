"""How well a local GGUF model calls tools through the local provider, and how fast: the
figures behind the "Tools" part of docs/providers.md.

20 fixed prompts each ask for the weather in one city; the step offers two tools,
`get_weather(city)` and a distractor `get_time(zone)`. A reply scores when it holds a
well-formed call (JSON arguments that are an object) to `get_weather`, and scores "right
city" when its `city` argument names the city asked about. 5 control prompts need no
tool: a call there is a false call. Each setting of `tool_choice` runs every prompt:

- `auto`: the model decides (the default; what an agent step gets);
- `required`: llama.cpp's grammar forces one well-formed call to either tool (so this
  measures choosing the tool and the argument, not the format).

Prints, per setting, the shares and the output tokens per second (generation only, the
prompt's evaluation included in the time). The default model is the bundled
SmolLM2-135M-Instruct; `--model PATH` measures another GGUF the same way.

    python benchmarks/local_tools.py [--model PATH] [--show]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awf_nb.engine.ports import Final, ToolCall, ToolSpec, TurnRequest, Usage  # noqa: E402
from awf_nb.providers.local import LocalProvider  # noqa: E402

SYSTEM = "You are a helpful assistant. Use the tools when they help."
TOOLS = [
    ToolSpec(
        "get_weather",
        "Get the current weather in a city",
        {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the city's name"}},
            "required": ["city"],
        },
    ),
    ToolSpec(
        "get_time",
        "Get the current time in a time zone",
        {
            "type": "object",
            "properties": {"zone": {"type": "string", "description": "e.g. Europe/Paris"}},
            "required": ["zone"],
        },
    ),
]
CITIES = {
    "What's the weather in Paris?": "Paris",
    "Is it raining in London right now?": "London",
    "Tell me the weather for Tokyo.": "Tokyo",
    "How hot is it in Cairo today?": "Cairo",
    "Weather in Berlin, please.": "Berlin",
    "Do I need an umbrella in Seattle today?": "Seattle",
    "What is the temperature in Madrid?": "Madrid",
    "Is it sunny in Rome?": "Rome",
    "How cold is it in Oslo right now?": "Oslo",
    "Check the weather in Sydney for me.": "Sydney",
    "Will it snow in Montreal today?": "Montreal",
    "What's it like outside in Lisbon?": "Lisbon",
    "Current weather conditions in Nairobi?": "Nairobi",
    "Is it windy in Chicago?": "Chicago",
    "Get me the weather in Mumbai.": "Mumbai",
    "How warm is it in Athens?": "Athens",
    "What's the forecast right now in Dublin?": "Dublin",
    "Is it humid in Singapore today?": "Singapore",
    "Weather report for Vienna, please.": "Vienna",
    "Should I wear a coat in Prague today?": "Prague",
}
CONTROLS = [
    "Say hello.",
    "What is 2 + 2?",
    "Write a haiku about the sea.",
    "Who wrote Hamlet?",
    "Give me a synonym for happy.",
]
MAX_TOKENS = 64


@dataclass
class Score:
    well_formed: int = 0  # a call to get_weather with a JSON object as arguments
    right_city: int = 0
    false_calls: int = 0  # controls answered with a call
    tokens: int = 0
    seconds: float = 0.0
    replies: list[str] = field(default_factory=list)


def weather_city(calls: list[ToolCall]) -> str | None:
    """The city of the first well-formed get_weather call, else None."""
    for call in calls:
        if call.name != "get_weather":
            continue
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            continue
        if isinstance(arguments, dict):
            return str(arguments.get("city", ""))
    return None


async def one_turn(
    provider: LocalProvider, prompt: str, options: dict[str, Any], score: Score
) -> list[ToolCall]:
    turn = TurnRequest(prompt=prompt, system_prompt=SYSTEM, tools=TOOLS, options=options)
    calls: list[ToolCall] = []
    started = time.perf_counter()
    async for event in provider.stream(turn):
        if isinstance(event, ToolCall):
            calls.append(event)
        elif isinstance(event, Usage):
            score.tokens += event.output_tokens
        elif isinstance(event, Final):
            shown = " ".join(f"{c.name}({c.arguments})" for c in calls) or event.text
            score.replies.append(f"{prompt} -> {shown}")
    score.seconds += time.perf_counter() - started
    return calls


async def run_setting(options: dict[str, Any]) -> Score:
    provider = LocalProvider()
    score = Score()
    for prompt, city in CITIES.items():
        found = weather_city(await one_turn(provider, prompt, options, score))
        if found is not None:
            score.well_formed += 1
            score.right_city += city.lower() in found.lower()
    if options.get("tool_choice", "auto") == "auto":  # forcing makes every reply a call
        for prompt in CONTROLS:
            score.false_calls += bool(await one_turn(provider, prompt, options, score))
    await provider.aclose()
    return score


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .gguf file (default: the bundled SmolLM2-135M)")
    parser.add_argument("--show", action="store_true", help="print every reply")
    args = parser.parse_args()
    base: dict[str, Any] = {"max_tokens": MAX_TOKENS, "temperature": 0.2}
    if args.model:
        base["model"] = str(Path(args.model).resolve())
    await one_turn(LocalProvider(), "Say hi.", base, Score())  # warm-up: loads the model
    print(f"model: {args.model or 'bundled SmolLM2-135M-Instruct (Q4_1)'}")
    print(
        f"{'tool_choice':12} {'get_weather':>12} {'right city':>11} "
        f"{'false calls':>12} {'tokens/s':>9}"
    )
    for choice in ("auto", "required"):
        score = await run_setting({**base, "tool_choice": choice})
        total = len(CITIES)
        false_calls = f"{score.false_calls}/{len(CONTROLS)}" if choice == "auto" else "-"
        print(
            f"{choice:12} {score.well_formed / total:12.0%} {score.right_city / total:11.0%} "
            f"{false_calls:>12} {score.tokens / score.seconds:9.1f}"
        )
        if args.show:
            for reply in score.replies:
                print("   ", reply.replace("\n", " ")[:200])


if __name__ == "__main__":
    asyncio.run(main())
