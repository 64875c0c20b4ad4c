"""`awf doctor`: what works on this machine, and what to do about what doesn't.

Each check is one function returning `Check`s: the Python and awf-nb versions against the
versions the tests passed with (the constraints file shipped in the package), the bundled
model (asked for one short reply in a model process of its own, so a crash of llama.cpp
is reported, not suffered; the CPU features its build uses against those the machine
runs), the agent CLIs found, the notebook pieces, Ray, and the store folder. Every check
is bounded in time; none changes anything but a temporary file in the store folder.

The command (`frontends/commands/doctor.py`) prints them; `--json` gives them to tools.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from awf_nb._version import __version__

Status = Literal["ok", "warn", "fail", "info"]

# The versions the test suite passed with (`scripts/refresh-constraints` writes it).
CONSTRAINTS_FILE = Path(__file__).resolve().parents[1] / "constraints.txt"
# How long the bundled model may take to load and write its short reply.
MODEL_CHECK_SECONDS = 180.0
# How long an agent CLI may take to print its version.
VERSION_SECONDS = 15.0
PORTABLE_BUILD = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
    "pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python"
)
# The agent CLIs awf-nb drives, and the version each was checked against
# (tests/providers/cli/install_clis.sh installs exactly these).
TESTED_CLIS = {
    "claude": "2.1.197",
    "gemini": "0.61.0",
    "codex": "0.169.0",
    "opencode": "1.18.33",
    "copilot": "1.0.102",
    "vibe": "3.0.2",
}
# CPU features that decide whether llama.cpp's code runs here, as llama.cpp names them in
# its system info and as Linux names them in /proc/cpuinfo.
CPU_FEATURES = {
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AVX_VNNI": "avx_vnni",
    "AMX_INT8": "amx_int8",
}


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, how it stands, and what to do when it is not ok."""

    name: str
    status: Status
    summary: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_checks(*, model: bool = True) -> list[Check]:
    """Every check, in the order they are shown; `model=False` skips running the model."""
    checks: list[Callable[[], list[Check]]] = [python_and_awf, tested_versions]
    if model:
        checks.append(local_model)
    checks += [agent_clis, notebook, ray, store_folder]
    found: list[Check] = []
    for check in checks:
        try:
            found += check()
        except Exception as exc:
            name = check.__name__.replace("_", " ")
            found.append(Check(name, "warn", f"could not be checked: {type(exc).__name__}: {exc}"))
    return found


# --- versions --------------------------------------------------------------------------------


def python_and_awf() -> list[Check]:
    python = platform.python_version()
    ok = sys.version_info >= (3, 11)
    return [
        Check(
            "python",
            "ok" if ok else "fail",
            f"Python {python} ({sys.executable})",
            "" if ok else "awf-nb needs Python 3.11 or newer",
        ),
        Check("awf-nb", "info", f"awf-nb {__version__} ({Path(__file__).resolve().parents[1]})"),
    ]


def read_constraints(path: Path | None = None) -> dict[str, str]:
    """`name==version` lines of a constraints file (the shipped one by default), by
    normalised name."""
    path = path or CONSTRAINTS_FILE
    pinned: dict[str, str] = {}
    if not path.is_file():
        return pinned
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and ";" not in line:
            name, version = line.split("==", 1)
            pinned[_normalise(name)] = version.strip()
    return pinned


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def tested_versions() -> list[Check]:
    pinned = read_constraints()
    if not pinned:
        return [Check("tested versions", "info", "no list of tested versions in this install")]
    installed = {
        _normalise(dist.metadata["Name"] or ""): dist.version
        for dist in importlib.metadata.distributions()
    }
    differ = sorted(
        f"{name} {installed[name]} (tested {version})"
        for name, version in pinned.items()
        if name in installed and installed[name] != version
    )
    if not differ:
        return [
            Check(
                "tested versions",
                "ok",
                f"every installed package the tests use is at its tested version "
                f"({CONSTRAINTS_FILE.name})",
            )
        ]
    shown = ", ".join(differ[:6]) + (f" and {len(differ) - 6} more" if len(differ) > 6 else "")
    return [
        Check(
            "tested versions",
            "warn",
            f"{len(differ)} installed packages differ from the tested versions: {shown}",
            f"to install the tested versions: pip install -c {CONSTRAINTS_FILE} "
            "'awf-nb[local,notebook]' (from a clone: pip install -c awf_nb/constraints.txt "
            "'.[local,notebook]')",
        )
    ]


# --- the bundled model -----------------------------------------------------------------------


def machine_cpu_flags() -> set[str]:
    """The CPU flags Linux reports (empty where /proc/cpuinfo is not there)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def build_cpu_features(system_info: str) -> set[str]:
    """The CPU features a llama.cpp build uses, from its system info (`AVX2 = 1 | …`)."""
    return set(re.findall(r"\b([A-Z0-9_]+) = 1", system_info)) & set(CPU_FEATURES)


def local_model() -> list[Check]:
    if importlib.util.find_spec("llama_cpp") is None:
        return [
            Check(
                "bundled model",
                "warn",
                "llama-cpp-python is not installed: the `local` provider is not available",
                "pip install 'awf-nb[local]' (compiles llama.cpp once, see README.md)",
            )
        ]
    from awf_nb.engine.ports import Final, TurnRequest, Usage
    from awf_nb.engine.summary import format_duration
    from awf_nb.errors import AwfError
    from awf_nb.providers.local import LocalProvider
    from awf_nb.providers.local_process import ModelProcess

    process = ModelProcess()  # its own, so a crash here touches no other run
    found: list[Check] = []
    try:
        info = process.request("info", timeout=MODEL_CHECK_SECONDS)
        found.append(_build_check(info))
        started = time.perf_counter()
        events = _run_async(
            _collect(LocalProvider(process=process), TurnRequest(prompt="Say hi.", options=_REPLY)),
            MODEL_CHECK_SECONDS,
        )
        seconds = time.perf_counter() - started
        reply = next((e.text for e in events if isinstance(e, Final)), "")
        usage = next((e for e in events if isinstance(e, Usage)), None)
        tokens = usage.output_tokens if usage else 0
        found.append(
            Check(
                "bundled model",
                "ok" if reply.strip() else "warn",
                f"loaded and replied in {format_duration(seconds)} ({tokens} tokens): "
                f"{_excerpt(reply)!r}",
                "" if reply.strip() else "the model's reply was empty",
            )
        )
    except (AwfError, TimeoutError) as exc:
        found.append(
            Check(
                "bundled model",
                "fail",
                str(exc),
                "rebuild llama.cpp for any x86-64 CPU with AVX2 (a few minutes): " + PORTABLE_BUILD,
            )
        )
    finally:
        process.close()
    return found


_REPLY = {"max_tokens": 8, "temperature": 0}


def _build_check(info: dict[str, Any]) -> Check:
    version = info.get("llama_cpp_python", "?")
    used = build_cpu_features(str(info.get("system_info", "")))
    machine = machine_cpu_flags()
    missing = sorted(f for f in used if machine and CPU_FEATURES[f] not in machine)
    shown = ", ".join(sorted(used)) or "none beyond SSE"
    if missing:
        return Check(
            "llama.cpp build",
            "fail",
            f"llama-cpp-python {version} uses {', '.join(missing)}, which this CPU lacks",
            "rebuild it for this machine: " + PORTABLE_BUILD,
        )
    wide = sorted(f for f in used if f.startswith(("AVX512", "AMX")))
    note = (
        f"; built for this CPU's {', '.join(wide)} (a native build): if the model crashes, "
        "a portable build runs everywhere"
        if wide
        else ""
    )
    return Check("llama.cpp build", "ok", f"llama-cpp-python {version}, CPU features {shown}{note}")


async def _collect(provider: Any, turn: Any) -> list[Any]:
    return [event async for event in provider.stream(turn)]


def _run_async(coro: Any, timeout: float) -> Any:
    import asyncio

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    # In a notebook the kernel's loop runs: the check gets a loop of its own in a thread.
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, bounded()).result()


def _excerpt(text: str, limit: int = 60) -> str:
    from awf_nb.safe_text import terminal_safe

    text = " ".join(text.split())
    return terminal_safe(text if len(text) <= limit else text[: limit - 1] + "…")


# --- agent CLIs, notebook, Ray, store ----------------------------------------------------------


def agent_clis() -> list[Check]:
    found: list[Check] = []
    for binary, tested in TESTED_CLIS.items():
        path = shutil.which(binary)
        if path is None:
            found.append(Check(f"agent CLI {binary}", "info", "not found on PATH"))
            continue
        version = _cli_version(path)
        if version is None:
            found.append(
                Check(f"agent CLI {binary}", "warn", f"{path}: its version could not be read")
            )
            continue
        if _version_key(version) == _version_key(tested):
            found.append(Check(f"agent CLI {binary}", "ok", f"{binary} {version} ({path})"))
            continue
        relation = "newer" if _version_key(version) > _version_key(tested) else "older"
        found.append(
            Check(
                f"agent CLI {binary}",
                "warn",
                f"{binary} {version} ({path}) is {relation} than the version awf-nb was "
                f"checked with ({tested}): it may work; its output format may differ",
            )
        )
    return found


def _cli_version(path: str) -> str | None:
    from awf_nb.engine.process import child_env, run_process
    from awf_nb.errors import AwfError

    try:
        done = _run_async(
            run_process(
                [path, "--version"],
                cwd=Path.cwd(),
                env=child_env(os.environ),
                timeout=VERSION_SECONDS,
                output_limit=64 * 1024,
                contain=True,
            ),
            VERSION_SECONDS + 5,
        )
    except (AwfError, OSError, TimeoutError):
        return None
    match = re.search(r"\d+\.\d+(?:\.\d+)?", done.stdout + done.stderr)
    return match.group(0) if match else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def notebook() -> list[Check]:
    names = ["ipython", "ipykernel", "ipywidgets", "anywidget", "jupyterlab"]
    versions = {name: _installed(name) for name in names}
    missing = [name for name in ("ipython", "ipywidgets", "anywidget") if versions[name] is None]
    shown = ", ".join(f"{n} {v}" for n, v in versions.items() if v)
    if missing:
        return [
            Check(
                "notebook",
                "warn" if shown else "info",
                f"missing {', '.join(missing)}" + (f" (installed: {shown})" if shown else ""),
                "for `%%awf` in Jupyter: pip install 'awf-nb[notebook]'",
            )
        ]
    extensions = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    widgets = (extensions / "@jupyter-widgets" / "jupyterlab-manager").is_dir()
    lab = (
        "; JupyterLab's widget extension is installed"
        if widgets
        else "; JupyterLab's widget extension was not found in this environment "
        "(the panel needs jupyterlab_widgets where JupyterLab runs)"
    )
    return [Check("notebook", "ok" if widgets else "warn", shown + lab)]


def ray() -> list[Check]:
    version = _installed("ray")
    if version is None:
        return [Check("ray", "info", "not installed (only `awf eval --executor ray` needs it)")]
    return [Check("ray", "ok", f"ray {version}")]


def store_folder() -> list[Check]:
    from awf_nb.store import default_root

    root = default_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return [
            Check(
                "store",
                "fail",
                f"runs cannot be saved in {root}: {exc.strerror or exc}",
                "set AWF_STORAGE to a writable folder (or pass --storage)",
            )
        ]
    free = shutil.disk_usage(root).free
    return [Check("store", "ok", f"{root} is writable ({free / 2**30:.1f} GiB free)")]


def environment_summary() -> dict[str, str]:
    """Where this was run: the machine and the Python, for a bug report."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": str(os.cpu_count() or "?"),
        "python": sys.executable,
    }
