"""The status words of runs and steps, in a module of their own so that code which only
reads them (`awf history`, the store's queries) does not import the state models."""

from __future__ import annotations

from typing import Literal

StepStatus = Literal["pending", "running", "completed", "failed", "skipped", "cancelled"]
# "interrupted" is never written by a run: it is how a run still marked "running" whose
# process is gone (killed, crashed) is shown (`RunState.shown_status`).
RunStatus = Literal["pending", "running", "completed", "failed", "cancelled", "interrupted"]
# `condition` and `max_turns` end an exchange with a partner other than the person.
StoppedBy = Literal["", "user_exit", "error", "cancelled", "condition", "max_turns"]
