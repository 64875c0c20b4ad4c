"""How often the bundled local model repeats itself, and how fast it writes, per sampling
setting: the figures behind the local provider's default options.

A fixed set of 20 prompts (single questions and short conversations, as the README's chat
produces them) runs through the local provider with each candidate setting, 200 tokens at
most per reply (as workflows/chat.yaml asks). A reply "repeats" when one of its sentences
(15+ characters) appears twice, or a run of 5 words appears 3 times. Prints, per setting,
the share of replies that repeat and the tokens per second.

    python benchmarks/local_quality.py [--only NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awf_nb.engine.ports import Final, Message, TextDelta, TurnRequest, Usage  # noqa: E402
from awf_nb.providers.local import LocalProvider  # noqa: E402

SYSTEM = (
    "You are a concise assistant. Help the user make their request precise. Ask exactly one "
    "short clarifying question per reply, and never answer your own question."
)
GARDEN = [
    Message("user", "I would like help with planning a small vegetable garden."),
    Message("assistant", "What vegetables would you like to grow?"),
    Message("user", "Tomatoes and basil."),
    Message("assistant", "How much space do you have for the garden?"),
]
PROMPTS: list[tuple[list[Message], str]] = [
    ([], "I would like help with planning a small vegetable garden."),
    ([], "I would like help with learning to bake bread."),
    ([], "I would like help with a birthday party for a 6-year-old."),
    ([], "I would like help with writing a cover letter."),
    ([], "I would like help with choosing a laptop."),
    ([], "I would like help with training for a 5 km run."),
    ([], "I would like help with organising my week."),
    ([], "I would like help with learning Spanish."),
    ([], "I would like help with painting my bedroom."),
    ([], "I would like help with a trip to Lisbon."),
    (GARDEN, "How often should I water it?"),
    (GARDEN, "A sunny balcony, about two square metres."),
    (GARDEN, "What soil should I buy?"),
    ([], "Explain what a workflow engine is."),
    ([], "Give me three tips for better sleep."),
    ([], "How do I keep basil alive indoors?"),
    ([], "What is a good first programming language?"),
    ([], "Describe a calm morning routine."),
    ([], "How should I store fresh bread?"),
    ([], "Suggest a simple dinner for two."),
]
SETTINGS: dict[str, dict[str, float]] = {
    "library defaults": {"temperature": 0.2, "top_p": 0.95, "repeat_penalty": 1.0},
    "chat.yaml (t=0.3)": {"temperature": 0.3, "top_p": 0.95, "repeat_penalty": 1.0},
    "repeat 1.1": {"temperature": 0.3, "repeat_penalty": 1.1},
    "repeat 1.1 (t=0.2)": {"temperature": 0.2, "repeat_penalty": 1.1},
    "repeat 1.15": {"temperature": 0.3, "repeat_penalty": 1.15},
    "repeat 1.2": {"temperature": 0.3, "repeat_penalty": 1.2},
    "repeat 1.1 + freq 0.3": {"temperature": 0.3, "repeat_penalty": 1.1, "frequency_penalty": 0.3},
}
MAX_TOKENS = 200


def repeats(text: str) -> bool:
    sentences = [
        " ".join(s.lower().split()) for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()
    ]
    if any(n >= 2 for s, n in Counter(sentences).items() if len(s) >= 15):
        return True
    words = re.findall(r"\w+", text.lower())
    grams = Counter(tuple(words[i : i + 5]) for i in range(len(words) - 4))
    return any(n >= 3 for n in grams.values())


async def run_setting(options: dict[str, float]) -> tuple[float, float, list[str]]:
    provider = LocalProvider()
    tokens, seconds, replies, looping = 0, 0.0, [], 0
    for history, prompt in PROMPTS:
        turn = TurnRequest(
            prompt=prompt,
            system_prompt=SYSTEM,
            history=list(history),
            options={**options, "max_tokens": MAX_TOKENS},
        )
        started = time.perf_counter()
        text = ""
        async for event in provider.stream(turn):
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, Usage):
                tokens += event.output_tokens
            elif isinstance(event, Final):
                text = event.text
        seconds += time.perf_counter() - started
        replies.append(text)
        looping += repeats(text)
    await provider.aclose()
    return looping / len(PROMPTS), tokens / seconds, replies


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run one setting (its name)")
    parser.add_argument("--show", action="store_true", help="print every reply")
    args = parser.parse_args()
    await run_setting(SETTINGS["library defaults"])  # warm-up: loads the model
    print(f"{'setting':26} {'repeating':>10} {'tokens/s':>9}")
    for name, options in SETTINGS.items():
        if args.only and name != args.only:
            continue
        share, speed, replies = await run_setting(options)
        print(f"{name:26} {share:10.0%} {speed:9.1f}")
        if args.show:
            for reply in replies:
                print("   ", reply.replace("\n", " ")[:300])


if __name__ == "__main__":
    asyncio.run(main())
