#!/usr/bin/env bash
# SAM CLI, cargo-lambda and zig in .venv-sam (from infra/local/requirements.txt), made again only
# when the requirements change. Source it from the repository root: it also puts the venv first
# on PATH and turns SAM's telemetry off.
if [ ! -x .venv-sam/bin/sam ] || ! cmp -s infra/local/requirements.txt .venv-sam/requirements.txt; then
  rm -rf .venv-sam
  python3 -m venv .venv-sam
  .venv-sam/bin/pip install --quiet --disable-pip-version-check -r infra/local/requirements.txt
  cp infra/local/requirements.txt .venv-sam/requirements.txt
fi
export PATH="$PWD/.venv-sam/bin:$PATH" SAM_CLI_TELEMETRY=0
