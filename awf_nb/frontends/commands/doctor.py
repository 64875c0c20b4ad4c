"""`awf doctor` (and `%awf doctor`): what works on this machine, and what to do about the rest.

The checks are in `awf_nb/runs/doctor.py`; this module prints them, one line each with a
mark, and the fix under what is not ok. Exit status 0 unless a check failed (1).
"""

from __future__ import annotations

import argparse
import json
import sys

from awf_nb.frontends.commands.table import command

MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "info": "--  "}


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--no-model",
        action="store_true",
        help="skip asking the bundled model for a reply (it takes a few seconds)",
    )


@command(
    "doctor", "check what works on this machine: model, agent CLIs, notebook, store", _configure
)
def cmd_doctor(args: argparse.Namespace) -> int:
    """Check what works on this machine, and say what to do about what doesn't.

    The Python and awf-nb versions against the versions the tests passed with; the bundled
    model, asked for one short reply in a process of its own (a crash is reported, not
    suffered), and the CPU features its llama.cpp build uses; each agent CLI found and its
    version; the notebook pieces; Ray; whether the store folder is writable. Exit status 0
    unless a check failed (1).
    """
    from awf_nb.runs.doctor import environment_summary, run_checks
    from awf_nb.safe_text import terminal_safe

    checks = run_checks(model=not args.no_model)
    failed = any(check.status == "fail" for check in checks)
    if args.json:
        document = {
            "ok": not failed,
            "environment": environment_summary(),
            "checks": [check.as_dict() for check in checks],
        }
        print(json.dumps(document, indent=2))
        return 1 if failed else 0
    out = sys.stdout
    for check in checks:
        print(f"{MARKS[check.status]}  {check.name}: {terminal_safe(check.summary)}", file=out)
        if check.fix and check.status in ("warn", "fail"):
            print(f"      → {terminal_safe(check.fix)}", file=out)
    counts = {status: sum(c.status == status for c in checks) for status in ("fail", "warn")}
    print(
        f"\n{counts['fail']} failed, {counts['warn']} warnings"
        if failed or counts["warn"]
        else "\neverything checked works",
        file=out,
    )
    return 1 if failed else 0
