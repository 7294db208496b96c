#!/usr/bin/env bash
# The image `sam local` runs provided.al2023 functions on, built offline: SAM looks for
# public.ecr.aws/lambda/provided:al2023-<arch> and adds its own emulator on top (so the base needs
# /bin/sh). A Debian minbase root with CA certificates serves: the functions are static-enough
# Rust binaries that need only libc and a CA store. No registry is asked (--skip-pull-image).
# Usage: infra/local/base-image.sh   (a no-op when the image exists)
set -euo pipefail
image="public.ecr.aws/lambda/provided:al2023-$(uname -m)"
if docker image inspect "$image" > /dev/null 2>&1; then
  exit 0
fi
command -v debootstrap > /dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap > /dev/null; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" > /dev/null
rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
tar -C "$root" -c . | docker import - "$image" > /dev/null
echo "built $image"
