"""A fake agent CLI: installed under a CLI's name (claude, gemini, …) first on PATH.

It records how it was called (argv, stdin, cwd, environment, its pid and process group,
the settings file gemini would read) to `$FAKE_CLI_DIR/record-N.json`, then prints a recorded sample of the real CLI's output
line by line with small sleeps, so tests can check that events stream as they arrive.

What invocation N does comes from `$FAKE_CLI_DIR/plan.json`, a list of steps (the last
one repeats):
  sample        file in $FAKE_CLI_SAMPLES printed on stdout ("" prints nothing)
  stderr        text written to stderr after stdout
  exit          exit status (default 0)
  delay         seconds between lines (default 0.005)
  gate          before the last line, wait (≤ 5 s) for `$FAKE_CLI_DIR/gate` to exist
  hang          after printing, sleep 60 s (for cancel and timeout tests)
  spawn_child   start a child process (same group, inheriting stdout) that sleeps 60 s
  ignore_term   ignore SIGTERM, and so does the child (the provider must use SIGKILL)
  repeat        [N, times]: print line N of the sample `times` times, without delay (an
                agent that never stops, e.g. endless tool_use events)
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ENV_SHOWN = (
    "IS_SANDBOX", "FAKE_OPTION_ENV", "FAKE_TURN_ENV", "HOME",
    "OPENCODE_CONFIG_CONTENT", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
)  # fmt: skip
# A settings file the provider writes for the turn only: recorded while it exists.
SETTINGS_FILE_VARIABLE = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"


def main() -> int:
    folder = Path(os.environ["FAKE_CLI_DIR"])
    plan = json.loads((folder / "plan.json").read_text())
    number = len(list(folder.glob("record-*.json")))
    step = plan[min(number, len(plan) - 1)]
    if step.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stdin = sys.stdin.read() if not sys.stdin.isatty() else ""
    child = None
    if step.get("spawn_child"):
        # An ignored SIGTERM stays ignored across exec: with ignore_term the child ignores it too.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    record = {
        "binary": Path(sys.argv[0]).name,
        "argv": sys.argv[1:],
        "stdin": stdin,
        "cwd": os.getcwd(),
        "env_keys": sorted(os.environ),
        "env": {k: os.environ[k] for k in ENV_SHOWN if k in os.environ},
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "child_pid": child.pid if child else None,
        "settings_file": read_settings_file(),
    }
    (folder / f"record-{number}.json").write_text(json.dumps(record))
    print_sample(folder, step, number)
    sys.stderr.write(step.get("stderr", ""))
    sys.stderr.flush()
    if step.get("hang"):
        time.sleep(60)
    return int(step.get("exit", 0))


def read_settings_file() -> str | None:
    path = os.environ.get(SETTINGS_FILE_VARIABLE)
    try:
        return Path(path).read_text() if path else None
    except OSError:
        return None


def print_sample(folder: Path, step: dict, number: int) -> None:
    name = step.get("sample", "")
    lines = (Path(os.environ["FAKE_CLI_SAMPLES"]) / name).read_text().splitlines() if name else []
    delay = float(step.get("delay", 0.005))
    repeat_line, repeat_times = step.get("repeat", (-1, 0))
    for index, line in enumerate(lines):
        if index == repeat_line:
            for _ in range(repeat_times):
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
        if step.get("gate") and index == len(lines) - 1:
            passed = wait_for(folder / "gate", 5.0)
            (folder / f"gate-{number}.json").write_text(json.dumps({"passed": passed}))
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        time.sleep(delay)


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


if __name__ == "__main__":
    sys.exit(main())
