"""How well the bundled local model does what the example workflows ask, and how fast: the
figures behind the examples' prompts and the local provider's default options.

The prompt set is fixed and checked in (benchmarks/local_quality_prompts.yaml): one task
per thing the examples and docs ask the model — chat.yaml's clarifying question, the
writer and the reviewer of writer-reviewer.yaml, code-review.yaml's JSON verdict,
`--simulate-user`'s person, the getting-started greeting and an open question. Each task
reads its system prompt, message template and options from the example itself, so the
benchmark measures what the examples send today; a `variant` replaces them (`before` is
what they were before tuning). Every reply is scored on:

- refuses: an apology or refusal ("I'm sorry", "I can't assist") or the model talking
  about itself instead of the task ("as a … assistant, I specialize in …");
- on topic: it mentions one of the case's topic words;
- repeats: one of its sentences (15+ characters) appears twice, or a run of 5 words 3 times;
- follows: the task's instruction (one short question, a three-line haiku, an approval or a
  fix, the JSON verdict, a reply in the person's voice — see the YAML file's header);
- tokens/s: output tokens per second of generation (prompt evaluation included).

    python benchmarks/local_quality.py                      # the examples as they are
    python benchmarks/local_quality.py --variant before     # the examples before tuning
    python benchmarks/local_quality.py --task chat --set temperature=0.5 --show
    python benchmarks/local_quality.py --model path/to/other-instruct.gguf

`--seeds N` runs every case with N sampling seeds (from the provider's default seed up),
so settings that sample (temperature > 0) are compared on more than one draw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from awf_nb.engine.context import strip_fences  # noqa: E402
from awf_nb.engine.partner import simulated_user_prompt  # noqa: E402
from awf_nb.engine.ports import Final, Message, TurnRequest, Usage  # noqa: E402
from awf_nb.providers.local import DEFAULT_SEED, LocalProvider  # noqa: E402
from awf_nb.workflow.expr import evaluate  # noqa: E402
from awf_nb.workflow.loader import load_workflow  # noqa: E402
from awf_nb.workflow.model import AgentStep  # noqa: E402
from awf_nb.workflow.template import render  # noqa: E402

PROMPTS_FILE = Path(__file__).with_name("local_quality_prompts.yaml")

# What a refusal or a model talking about itself looks like in SmolLM2's replies.
REFUSAL = re.compile(
    r"\b(i'?m sorry|i am sorry|i apologi[sz]e|i can(?:not|'t|’t) (?:assist|help|provide|do|"
    r"write|create|plan|answer)|i(?:'m| am) (?:unable|not able)|unable to (?:assist|help)|"
    r"i don'?t have the ability|as an? (?:[\w-]+ ){0,5}(?:ai|assistant|language model)\b|"
    r"i specialize)",
    re.IGNORECASE,
)
# What an assistant says and a person asking for help does not.
ASSISTANT_VOICE = re.compile(
    r"(how can i (?:help|assist)|i'?d be (?:happy|glad) to|i can help|let me know if|"
    r"is there anything else|feel free to|here (?:are|is) (?:a|some|the)|as an? (?:ai|assistant)|"
    r"^(?:sure|certainly|of course|great question)\b|i'?m here to help|what can i do for you)",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass
class Source:
    """What a task sends: system prompt, message template, options (from an example)."""

    system: str | None = None
    prompt: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    output_format: str = ""
    until: str = ""  # the exchange's `until` (a reviewer's approval)


@dataclass
class Case:
    task: str
    check: str
    system: str | None
    message: str
    history: list[Message]
    options: dict[str, Any]
    output_format: str
    on_topic: list[str]
    expect: Any = None
    until: str = ""


@dataclass
class Score:
    replies: int = 0
    refuses: int = 0
    on_topic: int = 0
    repeats: int = 0
    follows: int = 0
    tokens: int = 0
    seconds: float = 0.0
    checked: bool = True
    shown: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        for name in ("replies", "refuses", "on_topic", "repeats", "follows", "tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds


# --- the prompt set --------------------------------------------------------------------------


def load_source(spec: dict[str, Any]) -> Source:
    """The system prompt, message template and options a task's example sends."""
    if "inline" in spec:
        inline = spec["inline"]
        return Source(inline.get("system"), inline["prompt"], dict(inline.get("options", {})))
    if spec.get("simulated_user"):
        return Source(system="{persona}", prompt="{{.reply}}")
    workflow = load_workflow(ROOT / spec["workflow"])
    step = workflow.steps[spec["step"]]
    assert isinstance(step, AgentStep), f"{spec['step']} is not an agent step"
    if spec.get("side") == "partner":
        assert step.conversation is not None and step.conversation.partner is not None
        partner = step.conversation.partner
        # What the partner is sent: its `prompt` template around the agent's reply, or the
        # reply itself.
        return Source(
            partner.system_prompt,
            partner.prompt or "{{.reply}}",
            dict(partner.options),
            until=step.conversation.until or "",
        )
    return Source(step.system_prompt, step.prompt or "", dict(step.options), step.output_format)


def build_cases(
    prompt_set: dict[str, Any], variant: dict[str, Any], tasks: list[str] | None
) -> list[Case]:
    cases: list[Case] = []
    defaults = dict(variant.get("options", {}))
    for name, task in prompt_set["tasks"].items():
        if tasks and name not in tasks:
            continue
        source = load_source(task["from"])
        override = variant.get(name, {})
        system = override.get("system", source.system)
        template = override.get("prompt", source.prompt)
        options = {**defaults, **override.get("options", source.options)}
        output_format = override.get("output_format", source.output_format)
        until = override.get("until", source.until)
        for raw in task["cases"]:
            data = {
                "inputs": raw.get("inputs", {}),
                "states": raw.get("states", {}),
                "reply": raw.get("message", ""),
            }
            message = raw["message"] if "history" in raw else render(template, data)
            if "history" in raw and raw.get("message") is None:
                raise ValueError(f"task {name}: a case with history needs a message")
            case_system = system
            if task["from"].get("simulated_user"):
                persona = raw["persona"]
                case_system = (
                    system.format(persona=persona)
                    if name in variant
                    else simulated_user_prompt(persona)
                )
            turns = raw.get("history", [])
            history = [Message(role, text) for turn in turns for role, text in turn.items()]
            if history and history[0].role == "assistant":
                # A later turn of the conversation the template starts: its first message.
                history.insert(0, Message("user", render(template, data)))
            cases.append(
                Case(
                    task=name,
                    check=task["check"],
                    system=case_system,
                    message=message,
                    history=history,
                    options=options,
                    output_format=output_format,
                    on_topic=raw.get("on_topic", []),
                    expect=raw.get("expect"),
                    until=until,
                )
            )
    return cases


# --- scoring ---------------------------------------------------------------------------------


def repeats(text: str) -> bool:
    sentences = [
        " ".join(s.lower().split()) for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()
    ]
    if any(n >= 2 for s, n in Counter(sentences).items() if len(s) >= 15):
        return True
    words = re.findall(r"\w+", text.lower())
    grams = Counter(tuple(words[i : i + 5]) for i in range(len(words) - 4))
    return any(n >= 3 for n in grams.values())


def on_topic(text: str, words: list[str]) -> bool:
    return any(re.search(r"\b" + re.escape(word.lower()), text.lower()) for word in words)


def word_count(text: str) -> int:
    return len(re.findall(r"\w+", text))


def follows(case: Case, text: str) -> bool | None:
    """Whether the reply does what the task asks (None: the task asks nothing checkable)."""
    check = case.check
    if check == "one_question":
        return text.count("?") == 1 and word_count(text) <= 40
    if check == "haiku":
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return len(lines) == 3 and word_count(text) <= 25
    if check == "verdict":  # approval is what ends the exchange: its `until` condition
        approves = bool(evaluate(case.until, {"message": text, "reply": "", "turn": 1}))
        if case.expect == "approve":
            return approves
        return not approves and 0 < word_count(text) <= 40
    if check == "json_review":
        try:
            verdict = json.loads(strip_fences(text))
        except ValueError:
            return False
        return (
            isinstance(verdict, dict)
            and verdict.get("approved") is case.expect
            and isinstance(verdict.get("summary"), str)
        )
    if check == "user_like":
        return not ASSISTANT_VOICE.search(text) and 0 < word_count(text) <= 40
    if check == "answer":
        return None
    raise ValueError(f"unknown check {check!r}")


# --- running ---------------------------------------------------------------------------------


async def run_case(
    provider: LocalProvider, case: Case, extra: dict[str, Any], model: str | None, seed: int
) -> tuple[str, int, float]:
    options = {**case.options, **extra, "seed": seed}
    if model:
        options["model"] = model
    turn = TurnRequest(
        prompt=case.message,
        system_prompt=case.system,
        history=list(case.history),
        options=options,
        output_format=case.output_format,
    )
    started = time.perf_counter()
    text, tokens = "", 0
    async for event in provider.stream(turn):
        if isinstance(event, Usage):
            tokens = event.output_tokens
        elif isinstance(event, Final):
            text = event.text
    return text, tokens, time.perf_counter() - started


async def measure(
    cases: list[Case], extra: dict[str, Any], model: str | None, seeds: int, show: bool
) -> dict[str, Score]:
    provider = LocalProvider()
    scores: dict[str, Score] = {}
    for case in cases:
        score = scores.setdefault(case.task, Score())
        for seed in range(DEFAULT_SEED, DEFAULT_SEED + seeds):
            text, tokens, seconds = await run_case(provider, case, extra, model, seed)
            followed = follows(case, text)
            score.replies += 1
            score.refuses += bool(REFUSAL.search(text))
            score.on_topic += on_topic(text, case.on_topic)
            score.repeats += repeats(text)
            score.checked = followed is not None
            score.follows += bool(followed)
            score.tokens += tokens
            score.seconds += seconds
            if show:
                mark = {True: "ok ", False: "NO ", None: "   "}[followed]
                flat = text.strip().replace("\n", " / ")
                score.shown.append(f"  {mark}{flat[:240]}")
    await provider.aclose()
    return scores


def share(part: int, whole: int) -> str:
    return f"{part / whole:6.0%}" if whole else "     –"


def print_table(title: str, scores: dict[str, Score]) -> Score:
    print(f"\n{title}")
    header = f"{'task':16} {'replies':>7} {'refuses':>7} {'on topic':>8} {'repeats':>7}"
    print(header + f" {'follows':>7} {'tokens/s':>8}")
    total = Score()
    checked = Score()
    for name, score in scores.items():
        follows_share = share(score.follows, score.replies) if score.checked else "     –"
        speed = score.tokens / score.seconds if score.seconds else 0.0
        print(
            f"{name:16} {score.replies:7} {share(score.refuses, score.replies):>7} "
            f"{share(score.on_topic, score.replies):>8} {share(score.repeats, score.replies):>7} "
            f"{follows_share:>7} {speed:8.1f}"
        )
        for line in score.shown:
            print(line)
        total.add(score)
        if score.checked:
            checked.add(score)
    speed = total.tokens / total.seconds if total.seconds else 0.0
    print(
        f"{'all':16} {total.replies:7} {share(total.refuses, total.replies):>7} "
        f"{share(total.on_topic, total.replies):>8} {share(total.repeats, total.replies):>7} "
        f"{share(checked.follows, checked.replies):>7} {speed:8.1f}"
    )
    return total


def parse_setting(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, yaml.safe_load(value)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variant", action="append", help="measure a variant of the prompt set (repeatable)"
    )
    parser.add_argument("--task", action="append", help="only this task (repeatable)")
    parser.add_argument(
        "--set", action="append", type=parse_setting, default=[], metavar="OPTION=VALUE",
        help="override a provider option for every case (repeatable)",
    )  # fmt: skip
    parser.add_argument("--model", help="another GGUF file (default: the bundled SmolLM2)")
    parser.add_argument("--seeds", type=int, default=1, help="sampling seeds per case")
    parser.add_argument("--show", action="store_true", help="print every reply")
    parser.add_argument(
        "--prompts", type=Path, default=PROMPTS_FILE, help="another prompt set (a YAML file)"
    )
    args = parser.parse_args()
    prompt_set = yaml.safe_load(args.prompts.read_text())
    variants = args.variant or ["examples"]
    extra = dict(args.set)
    # Warm-up: load the model, so the first task's speed does not include loading it.
    await run_case(
        LocalProvider(), build_cases(prompt_set, {}, None)[0], {"max_tokens": 1}, args.model, 1
    )
    totals: dict[str, Score] = {}
    for name in variants:
        variant = {} if name == "examples" else prompt_set["variants"][name]
        cases = build_cases(prompt_set, variant, args.task)
        scores = await measure(cases, extra, args.model, args.seeds, args.show)
        settings = f" with {extra}" if extra else ""
        totals[name] = print_table(f"== {name}{settings}", scores)


if __name__ == "__main__":
    asyncio.run(main())
