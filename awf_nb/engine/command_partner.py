"""A script as the other side of a conversation: `conversation.with: {command: …}`.

Each time the step's agent replies, the command runs (`$SHELL -c`, in the run's working
directory, through the one process supervisor: its own process group, killed on timeout,
Ctrl-C or cancel) with a JSON document on stdin:

    {"step": "draft", "turn": 1, "reply": "<the agent's latest reply>",
     "messages": [{"role": "user", "speaker": "", "content": "…"},
                  {"role": "assistant", "speaker": "", "content": "…"}, …]}

(`messages`: the conversation so far, the system prompt and tool lines left out; the
environment is the run's, with the inputs as variables and AWF_RUN_ID, AWF_STEP,
AWF_TURN). `turn` and AWF_TURN are the number of the reply it answers, counted as
`until`'s `turn` and a partner's `{{.turn}}` count it (this visit's replies, from 1). What
it prints on stdout, less the trailing newline, is the next message to
the agent; an empty stdout ends the exchange (`stopped_by: user_exit`); an exit status
other than 0 fails the step with the last line of its stderr. Its output is bounded
(`max_output_bytes`, 1 MiB by default, stdout and stderr together) and masked like a
command step's.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from awf_nb.engine import events as ev
from awf_nb.engine.agent import Reply
from awf_nb.engine.context import command_env
from awf_nb.engine.interruption import PartnerInterrupted
from awf_nb.engine.process import ProcessResult, default_shell, run_process
from awf_nb.engine.summary import format_limit
from awf_nb.engine.tool_slots import tool_process_slot
from awf_nb.errors import ExecutionError

if TYPE_CHECKING:
    from awf_nb.engine.context import LoopFrame
    from awf_nb.engine.runtime import StepRun
    from awf_nb.engine.state import ConversationState
    from awf_nb.workflow.model import AgentStep, Partner


class CommandPartner:
    """Answers the step's agent with what a command prints."""

    records_itself = False  # the conversation records its messages (with `last`'s time)

    def __init__(
        self,
        run: StepRun,
        step: AgentStep,
        conv: ConversationState,
        partner: Partner,
        loop: LoopFrame | None = None,
    ) -> None:
        self.run, self.step, self.conv, self.partner, self.loop = run, step, conv, partner, loop
        self.name = partner.name
        self.last: Reply | None = None

    async def answer(self, reply: str, turn: int) -> str | None:
        run, step, partner = self.run, self.step, self.partner
        # `turn` is the reply the message will ask for; the command is told the one it
        # answers, numbered as `until` and `{{.turn}}` number it
        answered = turn - 1 - self.conv.visit_start
        what = "conversation.with.command"
        command = run.ctx.render(partner.command or "", step=step.name, what=what, loop=self.loop)
        env = command_env(
            run.config.env, run.ctx.inputs,
            AWF_RUN_ID=run.run_id, AWF_STEP=step.name, AWF_TURN=str(answered),
        )  # fmt: skip
        timeout = partner.timeout if partner.timeout is not None else step.timeout
        started = time.monotonic()
        with run.interruptible() as cut:
            try:
                async with tool_process_slot():  # an eval's bound on tool processes
                    result = await run_process(
                        [default_shell(), "-c", command],
                        cwd=run.config.cwd,
                        env=env,
                        timeout=timeout,
                        stdin=self._document(reply, answered).encode(),
                        output_limit=partner.max_output_bytes,
                        contain=True,  # its background jobs end with the call, as a Bash call's
                    )
            except OSError as exc:
                raise ExecutionError(
                    f"step {step.name}: {what}: cannot start: {exc}", step=step.name
                ) from None
        if cut.happened:
            raise PartnerInterrupted()
        self._check(result, timeout)
        text = result.stdout.rstrip("\n")
        if not text.strip():
            return None
        self.conv.partner_turns += 1
        self.last = Reply(run.masker.mask(text), duration=time.monotonic() - started)
        run.emit(ev.UserMessage(run.run_id, step.name, run.masker.mask(text), turn, self.name))
        return text

    def _document(self, reply: str, turn: int) -> str:
        messages = [
            {"role": t.role, "speaker": t.speaker, "content": t.content}
            for t in self.conv.turns
            if t.role in ("user", "assistant")
        ]
        return json.dumps(
            {"step": self.step.name, "turn": turn, "reply": reply, "messages": messages},
            ensure_ascii=False,
        )

    def _check(self, result: object, timeout: float | None) -> None:
        assert isinstance(result, ProcessResult)
        name, masker = self.step.name, self.run.masker
        where = f"step {name}: conversation.with.command"
        if result.over_limit:
            raise ExecutionError(
                f"{where} printed more than {self.partner.max_output_bytes} bytes "
                "(conversation.with.max_output_bytes); stopped",
                step=name,
            )
        if result.timed_out:
            raise ExecutionError(f"{where} timed out after {format_limit(timeout)}", step=name)
        if result.exit_code != 0:
            last = masker.mask(result.stderr).strip().splitlines()[-1:] or [""]
            detail = f": {last[0]}" if last[0] else ""
            raise ExecutionError(f"{where}: exit code {result.exit_code}{detail}", step=name)
