#!/usr/bin/env bash
# Installs the real agent CLIs used by the `real_cli` tests into a private npm prefix, and
# the reference MCP filesystem server the agent-tools tests start (tests/tools); then
# Mistral's Vibe CLI (PyPI `mistral-vibe`, Python >= 3.12, every dependency pinned) into a
# virtualenv of its own ($AWF_VIBE_VENV, default <repo>/.vibe-cli), apart from awf's.
#
# Versions are pinned to the ones the parsers were checked against
# (shared/agent-clis/README.md). claude-code later than 2.1.197 needs Node >= 22.
# Usage: tests/providers/cli/install_clis.sh [PREFIX]   (default: $AWF_NPM_PREFIX or
# <repo>/.npm-cli). Idempotent: an already installed set is left alone.
# With AWF_REQUIRE_PEERS set (CI), a missing npm or a CLI missing after the install is an
# error (exit 1) instead of a warning, so the real_cli tests can never be skipped silently.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
prefix="${1:-${AWF_NPM_PREFIX:-$repo_root/.npm-cli}}"

packages=(
  "@anthropic-ai/claude-code@2.1.197"
  "@google/gemini-cli@0.61.0"
  "@openai/codex@0.169.0"
  "opencode-ai@1.18.33"
  "@github/copilot@1.0.102"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
)
binaries=(claude gemini codex opencode copilot mcp-server-filesystem)

required=0
case "${AWF_REQUIRE_PEERS:-}" in ""|0|false|no) ;; *) required=1 ;; esac

# --- Mistral Vibe (PyPI) ----------------------------------------------------------------
# 3.0.3 pins certifi==2026.10.19, which the registry does not have (only .post1): 3.0.2.
vibe_version="3.0.2"
vibe_venv="${AWF_VIBE_VENV:-$repo_root/.vibe-cli}"

python_312() {  # a Python >= 3.12 to build the venv with (Vibe's requirement)
  local candidate
  for candidate in python3.14 python3.13 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  for candidate in "$root"/versions/3.1[2-9]*/bin/python3; do
    if [[ -x "$candidate" ]]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

install_vibe() {
  if [[ -x "$vibe_venv/bin/vibe" ]] && "$vibe_venv/bin/vibe" --version 2>/dev/null |
    grep -q "$vibe_version"; then
    echo "install_clis: vibe $vibe_version already in $vibe_venv"
    return 0
  fi
  local python
  if ! python="$(python_312)"; then
    echo "install_clis: no Python >= 3.12 found for mistral-vibe" >&2
    return 1
  fi
  rm -rf "$vibe_venv"
  "$python" -m venv "$vibe_venv"
  "$vibe_venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mistral-vibe==$vibe_version"
  [[ -x "$vibe_venv/bin/vibe" ]] && echo "install_clis: vibe -> $vibe_venv/bin/vibe"
}

install_npm_clis() {
  if ! command -v npm >/dev/null 2>&1; then
    if [[ $required == 1 ]]; then
      echo "install_clis: npm not found, and AWF_REQUIRE_PEERS is set" >&2
      exit 1
    fi
    echo "install_clis: npm not found; the real_cli tests will be skipped" >&2
    return 0
  fi

  local all_present=1 bin
  for bin in "${binaries[@]}"; do
    [[ -x "$prefix/node_modules/.bin/$bin" ]] || all_present=0
  done
  if [[ $all_present == 1 ]]; then
    echo "install_clis: all CLIs already in $prefix"
    return 0
  fi

  mkdir -p "$prefix"
  # --no-fund/--no-audit: no extra registry round trips; the CLIs' own postinstall
  # scripts only pick the native binary shipped in an optional dependency.
  npm install --prefix "$prefix" --no-fund --no-audit --loglevel=error "${packages[@]}"
  local missing=0
  for bin in "${binaries[@]}"; do
    if [[ -x "$prefix/node_modules/.bin/$bin" ]]; then
      echo "install_clis: $bin -> $prefix/node_modules/.bin/$bin"
    else
      echo "install_clis: $bin missing after install" >&2
      missing=1
    fi
  done
  if [[ $missing == 1 && $required == 1 ]]; then
    echo "install_clis: AWF_REQUIRE_PEERS is set and a CLI is missing" >&2
    exit 1
  fi
}

install_npm_clis
if ! install_vibe; then
  if [[ $required == 1 ]]; then
    echo "install_clis: mistral-vibe could not be installed, and AWF_REQUIRE_PEERS is set" >&2
    exit 1
  fi
  echo "install_clis: mistral-vibe not installed; its real_cli tests will be skipped" >&2
fi
