"""A run's events made into OpenTelemetry GenAI spans (semantic conventions 1.44.0, still
"development"): one `invoke_workflow` span per run, a span per step (`invoke_agent` for
agent steps), a `chat` span per model turn, an `execute_tool` span per tool call, the
person's messages as span events.

The spans are plain objects (`Span`): the offline file needs no OpenTelemetry package, and
the live export turns them into the SDK's spans (`live.py`). Every text here came through
the run's one masking (`Runner.emit` masks every event before any sink sees it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from awf_nb.engine import events as ev
from awf_nb.engine.summary import RunSummary

SEMCONV_VERSION = "1.44.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
# OTLP span kinds (the proto's numbers) and status codes.
INTERNAL, CLIENT = 1, 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
# Spans a run keeps open at once (steps, turns, tool calls): a bound on a runaway run.
MAX_OPEN_SPANS = 10_000
# The longest text attribute (message contents, tool arguments) kept on a span.
MAX_TEXT = 16_384


@dataclass(slots=True)
class Span:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int = 0
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    status: int = STATUS_UNSET
    status_message: str = ""


def _hex(bits: int) -> str:
    return os.urandom(bits // 8).hex()


def _text(value: str) -> str:
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "…"


def _messages(role: str, text: str) -> str:
    """GenAI message contents in the conventions' JSON form."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": _text(text)}]}])


class SpanBuilder:
    """Turns one run's events into spans; `on_end(span)` is called as each span ends.

    `content`: message contents (prompts, replies, tool arguments and results) on the
    spans — only when the person opted in. `tags`: attributes of the run span (an eval's
    id, case, epoch, variant). `price(step, input_tokens, output_tokens)`: the USD of a
    model turn whose provider reported none (an eval's `pricing:`; None: no price);
    `run_cost`, set before the run ends, is the run span's cost (else the turns' sum).
    """

    def __init__(
        self,
        on_end: Callable[[Span], None],
        *,
        content: bool = False,
        tags: dict[str, Any] | None = None,
        trace_id: str | None = None,
        price: Callable[[str, int, int], float | None] | None = None,
    ) -> None:
        self._on_end = on_end
        self._price = price
        self.run_cost: float | None = None
        self._content = content
        self._tags = dict(tags or {})
        self.trace_id = trace_id or _hex(128)
        self._run: Span | None = None
        self._steps: dict[str, Span] = {}
        self._turns: dict[tuple[str, str], Span] = {}
        self._tools: dict[str, Span] = {}
        self._prompts: dict[tuple[str, str], str] = {}
        self.run_id = ""

    # --- spans -------------------------------------------------------------------------

    def _start(
        self, name: str, parent: Span | None, attrs: dict[str, Any], kind: int = INTERNAL
    ) -> Span:
        return Span(
            self.trace_id,
            _hex(64),
            parent.span_id if parent is not None else "",
            name,
            kind,
            time.time_ns(),
            attributes=attrs,
        )

    def _end(self, span: Span, error: str = "", cancelled: bool = False) -> None:
        span.end_ns = max(time.time_ns(), span.start_ns)
        if error or cancelled:
            span.status = STATUS_ERROR
            span.status_message = error or "cancelled"
            kind = "asyncio.CancelledError" if cancelled else "awf_nb.errors.RunFailed"
            span.attributes.setdefault("error.type", "cancelled" if cancelled else "error")
            span.events.append(
                (
                    "exception",
                    span.end_ns,
                    {"exception.type": kind, "exception.message": error or "cancelled"},
                )
            )
        self._on_end(span)

    def _open(self) -> int:
        return len(self._steps) + len(self._turns) + len(self._tools)

    def _parent(self, step: str) -> Span | None:
        return self._steps.get(step) or self._run

    # --- events ------------------------------------------------------------------------

    def emit(self, event: ev.RunEvent) -> None:
        """One event of the run (called on the run's loop; never blocks)."""
        # A dict lookup rather than a `match`: most events (streamed text, tool output)
        # make no span, and a `match` would try each case on each of them.
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)

    def _run_started(self, event: ev.RunStarted) -> None:
        if self._run is None:
            self.run_id = event.run_id
            self._run = self._start(
                f"invoke_workflow {event.workflow}",
                None,
                {
                    "gen_ai.operation.name": "invoke_workflow",
                    "gen_ai.workflow.name": event.workflow,
                    "gen_ai.conversation.id": event.run_id,
                    "awf.run.id": event.run_id,
                    "awf.run.resumed": event.resumed,
                },
            )
            self._run.attributes.update(self._tags)

    def _step_started(self, event: ev.StepStarted) -> None:
        if self._open() >= MAX_OPEN_SPANS:
            return
        attrs: dict[str, Any] = {
            "awf.step.name": event.step,
            "awf.step.kind": event.kind,
            "awf.step.attempt": event.attempt,
        }
        parent = self._parent(event.step.rpartition(".")[0])
        if event.kind == "agent":
            span = self._start(
                f"invoke_agent {event.step}",
                parent,
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": event.step,
                    "gen_ai.conversation.id": self.run_id,
                    **attrs,
                },
            )
            if event.mode:
                span.attributes["awf.step.mode"] = event.mode
        else:
            span = self._start(f"step {event.step}", parent, attrs)
        self._steps[event.step] = span

    def _step_finished(self, event: ev.StepFinished) -> None:
        if (span := self._steps.pop(event.step, None)) is not None:
            span.attributes["awf.step.status"] = event.status
            if event.tokens:
                span.attributes["awf.step.tokens"] = event.tokens
            error = event.error if event.status == "failed" else ""
            cancelled = event.status == "cancelled"
            for key in [k for k in self._turns if k[0] == event.step]:
                self._end(self._turns.pop(key), error=error, cancelled=not error)
            self._end(span, error=error, cancelled=cancelled)

    def _user_message(self, event: ev.UserMessage) -> None:
        if (parent := self._parent(event.step)) is not None:
            attrs = {"awf.turn": event.turn, "awf.speaker": event.speaker or "person"}
            if self._content:
                attrs["gen_ai.input.messages"] = _messages("user", event.text)
            parent.events.append(("gen_ai.user.message", time.time_ns(), attrs))
        if self._content:  # the prompt goes on the turn's span only with contents on
            self._prompts[(event.step, event.speaker)] = event.text

    def _turn_started(self, event: ev.TurnStarted) -> None:
        if self._open() < MAX_OPEN_SPANS:
            self._turn_start(event.step, event.speaker)

    def _tool_started(self, event: ev.ToolCallStarted) -> None:
        if self._open() >= MAX_OPEN_SPANS:
            return
        span = self._start(
            f"execute_tool {event.name}",
            self._parent(event.step),
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.name,
                "gen_ai.tool.call.id": event.call_id,
                "gen_ai.tool.type": "function",
            },
        )
        if self._content:
            span.attributes["gen_ai.tool.call.arguments"] = _text(event.arguments)
        self._tools[f"{event.step}\0{event.call_id}"] = span

    def _tool_finished(self, event: ev.ToolCallFinished) -> None:
        if (span := self._tools.pop(f"{event.step}\0{event.call_id}", None)) is not None:
            if event.outcome:
                span.attributes["awf.tool.outcome"] = event.outcome
            if self._content:
                span.attributes["gen_ai.tool.call.result"] = _text(event.result)
            self._end(span, error=(event.outcome or "the tool failed") if event.is_error else "")

    def _run_error(self, event: ev.RunError) -> None:
        target = self._steps.get(event.step) or self._run
        if target is not None:
            target.events.append(
                (
                    "exception",
                    time.time_ns(),
                    {"exception.type": "awf.RunError", "exception.message": event.message},
                )
            )

    def _run_finished(self, event: ev.RunFinished) -> None:
        self.finish(event.status, event.error, event.summary)

    def _turn_start(self, step: str, speaker: str) -> None:
        key = (step, speaker)
        if key in self._turns:
            return
        span = self._start(
            "chat",
            self._parent(step),
            {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": self.run_id},
            CLIENT,
        )
        if speaker:
            span.attributes["awf.speaker"] = speaker
        self._turns[key] = span

    def _turn_end(self, event: ev.TurnFinished) -> None:
        key = (event.step, event.speaker)
        span = self._turns.pop(key, None)
        if span is None:  # a tool round's reply: its own chat span
            self._turn_start(event.step, event.speaker)
            span = self._turns.pop(key)
        a = span.attributes
        if event.model:
            span.name = f"chat {event.model}"
            a["gen_ai.request.model"] = event.model
        if event.provider:
            a["gen_ai.provider.name"] = event.provider
        a["gen_ai.usage.input_tokens"] = event.input_tokens
        a["gen_ai.usage.output_tokens"] = event.output_tokens
        if event.tokens_estimated:
            a["awf.usage.estimated"] = True
        reason = (
            "cancelled"
            if event.interrupted
            else "length"
            if event.cut
            else "tool_calls"
            if event.tool_calls
            else "stop"
        )
        a["gen_ai.response.finish_reasons"] = [reason]
        cost, source = event.cost_usd, "provider"
        if cost is None and self._price is not None and not event.speaker:
            # A simulated user's turns are priced in the run's total only (at its own price).
            cost = self._price(event.step, event.input_tokens, event.output_tokens)
            source = "pricing"
        if cost is not None:
            a["awf.usage.cost_usd"] = float(cost)
            a["awf.usage.cost_source"] = source
            self._add_cost(event.step, float(cost))
        if self._content:
            prompt = self._prompts.pop(key, None)
            if prompt is not None:
                a["gen_ai.input.messages"] = _messages("user", prompt)
            a["gen_ai.output.messages"] = _messages("assistant", event.text)
        self._end(span, cancelled=event.interrupted)

    def _add_cost(self, step: str, cost: float) -> None:
        for span in (self._steps.get(step), self._run):
            if span is not None:
                span.attributes["awf.usage.cost_usd"] = (
                    span.attributes.get("awf.usage.cost_usd", 0.0) + cost
                )

    def finish(self, status: str, error: str = "", summary: RunSummary | None = None) -> None:
        """End every open span (the run's last): a cancelled or failed run's too."""
        cancelled = status == "cancelled"
        for spans in (self._tools, self._turns, self._steps):
            for span in list(spans.values())[::-1]:
                self._end(span, cancelled=cancelled or not error, error=error)
            spans.clear()
        run, self._run = self._run, None
        if run is None:
            return
        run.attributes["awf.run.status"] = status
        if self.run_cost is not None:  # the eval's own figure, rather than the turns' sum
            run.attributes["awf.usage.cost_usd"] = float(self.run_cost)
        if summary is not None and summary.tokens:
            run.attributes["awf.run.tokens"] = summary.tokens
        self._end(run, error=error if status == "failed" else "", cancelled=cancelled)


# The events that make or end spans, and their handlers (`SpanBuilder.emit`).
_HANDLERS: dict[type, Callable[[SpanBuilder, Any], None]] = {
    ev.RunStarted: SpanBuilder._run_started,
    ev.StepStarted: SpanBuilder._step_started,
    ev.StepFinished: SpanBuilder._step_finished,
    ev.UserMessage: SpanBuilder._user_message,
    ev.TurnStarted: SpanBuilder._turn_started,
    ev.TurnFinished: SpanBuilder._turn_end,
    ev.ToolCallStarted: SpanBuilder._tool_started,
    ev.ToolCallFinished: SpanBuilder._tool_finished,
    ev.RunError: SpanBuilder._run_error,
    ev.RunFinished: SpanBuilder._run_finished,
}
