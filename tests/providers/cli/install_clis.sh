#!/usr/bin/env bash
# Installs the real agent CLIs used by the `real_cli` tests into a private npm prefix, and
# the reference MCP filesystem server the agent-tools tests start (tests/tools).
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

if ! command -v npm >/dev/null 2>&1; then
  if [[ $required == 1 ]]; then
    echo "install_clis: npm not found, and AWF_REQUIRE_PEERS is set" >&2
    exit 1
  fi
  echo "install_clis: npm not found; the real_cli tests will be skipped" >&2
  exit 0
fi

all_present=1
for bin in "${binaries[@]}"; do
  [[ -x "$prefix/node_modules/.bin/$bin" ]] || all_present=0
done
if [[ $all_present == 1 ]]; then
  echo "install_clis: all CLIs already in $prefix"
  exit 0
fi

mkdir -p "$prefix"
# --no-fund/--no-audit: no extra registry round trips; the CLIs' own postinstall
# scripts only pick the native binary shipped in an optional dependency.
npm install --prefix "$prefix" --no-fund --no-audit --loglevel=error "${packages[@]}"
missing=0
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
