"""`awf doctor` on a machine where the bundled model works, and on one where its process
crashes (a real native crash: a preloaded library that segfaults the model process as it
starts, as llama.cpp built for the wrong CPU does). The checks' parsing edges are unit
tests at the end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from awf_nb.runs import doctor
from tests.support.cli import run_awf

CRASHER = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* Segfaults the model process (and only it) as it starts. */
__attribute__((constructor)) static void crash_if_model_process(void) {
    char cmdline[4096] = {0};
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (!f) return;
    size_t n = fread(cmdline, 1, sizeof cmdline - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++) if (cmdline[i] == '\0') cmdline[i] = ' ';
    if (strstr(cmdline, "awf_nb.providers.local_worker")) raise(SIGSEGV);
}
"""


def doctor_json(tmp_path: Path, env: dict[str, str | None] | None = None) -> tuple[int, dict]:
    done = run_awf(
        "doctor", "--json", cwd=tmp_path,
        env={"AWF_STORAGE": str(tmp_path / "storage"), **(env or {})}, timeout=600,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def by_name(document: dict) -> dict[str, dict]:
    return {check["name"]: check for check in document["checks"]}


@pytest.mark.real_model
def test_doctor_on_a_machine_where_the_model_works(tmp_path: Path) -> None:
    code, document = doctor_json(tmp_path)
    checks = by_name(document)
    assert code == 0 and document["ok"] is True, document
    assert checks["python"]["status"] == "ok"
    assert checks["bundled model"]["status"] == "ok"
    assert checks["bundled model"]["summary"].startswith("loaded and replied in ")
    assert checks["llama.cpp build"]["status"] == "ok"
    assert "AVX2" in checks["llama.cpp build"]["summary"]
    assert checks["store"]["status"] == "ok"
    assert {"tested versions", "notebook", "ray", "agent CLI claude"} <= set(checks)


@pytest.mark.real_model
def test_doctor_reports_a_model_process_that_crashes_and_says_what_to_do(tmp_path: Path) -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "a C compiler builds the crashing library this test preloads"
    source = tmp_path / "crasher.c"
    source.write_text(CRASHER)
    library = tmp_path / "libcrasher.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)

    code, document = doctor_json(tmp_path, {"LD_PRELOAD": str(library)})
    checks = by_name(document)
    assert code == 1 and document["ok"] is False
    model = checks["bundled model"]
    assert model["status"] == "fail"
    assert model["summary"].startswith(
        "the local model's process died: signal 11 (segmentation fault) while starting"
    )
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF' in model["fix"]
    # The rest of the machine is still checked.
    assert checks["store"]["status"] == "ok"

    text = run_awf(
        "doctor", cwd=tmp_path,
        env={"AWF_STORAGE": str(tmp_path / "storage"), "LD_PRELOAD": str(library)}, timeout=600,
    )  # fmt: skip
    assert text.returncode == 1
    assert "FAIL  bundled model: the local model's process died: signal 11" in text.stdout
    assert "→ rebuild llama.cpp for any x86-64 CPU with AVX2" in text.stdout


def test_doctor_without_the_model_is_quick_to_ask_for(tmp_path: Path) -> None:
    done = run_awf("doctor", "--no-model", "--json", cwd=tmp_path,
                   env={"AWF_STORAGE": str(tmp_path / "s")})  # fmt: skip
    checks = by_name(json.loads(done.stdout))
    assert "bundled model" not in checks and checks["store"]["status"] == "ok"


def test_an_unwritable_store_is_a_failure_with_the_way_out(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "a-file"  # root writes anywhere: a file where a folder must be
        blocked.write_text("")
        storage = blocked / "storage"
    else:
        storage = Path("/proc/awf-storage")
    done = run_awf(
        "doctor", "--no-model", "--json", cwd=tmp_path, env={"AWF_STORAGE": str(storage)}
    )
    assert done.returncode == 1
    store = by_name(json.loads(done.stdout))["store"]
    assert store["status"] == "fail" and "AWF_STORAGE" in store["fix"]


# --- the parsing edges -------------------------------------------------------------------


def test_the_build_s_cpu_features_are_read_from_its_system_info() -> None:
    info = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 0 |"
    assert doctor.build_cpu_features(info) == {"AVX", "AVX2", "F16C", "FMA"}


def test_a_build_using_features_the_cpu_lacks_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "machine_cpu_flags", lambda: {"avx", "avx2", "fma", "f16c"})
    check = doctor._build_check(
        {"llama_cpp_python": "0.3.36", "system_info": "AVX512 = 1 | AVX2 = 1"}
    )
    assert check.status == "fail"
    assert "uses AVX512, which this CPU lacks" in check.summary
    assert "GGML_NATIVE=OFF" in check.fix


def test_installed_versions_are_compared_with_the_constraints(tmp_path: Path, monkeypatch) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("# header\nPyYAML==0.0.1\nnot-installed-anywhere==1.0\n")
    monkeypatch.setattr(doctor, "CONSTRAINTS_FILE", constraints)
    [check] = doctor.tested_versions()
    assert check.status == "warn"
    assert "1 installed packages differ" in check.summary and "pyyaml" in check.summary
    assert doctor.read_constraints(constraints) == {
        "pyyaml": "0.0.1",
        "not-installed-anywhere": "1.0",
    }


def test_the_shipped_constraints_pin_the_bundled_model_s_engine() -> None:
    pinned = doctor.read_constraints()
    assert "llama-cpp-python" in pinned and "pyyaml" in pinned
