#!/usr/bin/env bash
# Docker for the deployed shape's tests, as this machine allows it:
#   tests/docker.sh install     docker.io and debootstrap from Debian, if missing
#   tests/docker.sh start LOG   a daemon with no bridge network and no iptables (containers can only
#                               use the host network, and only 127.0.0.1 is used); prints its pid
#                               once it answers. Whoever started it stops it, by that pid:
#   tests/docker.sh stop PID    SIGTERM, up to 20 s for it to end, then SIGKILL
set -euo pipefail
case "${1:-}" in
  install)
    if ! command -v dockerd > /dev/null || ! command -v debootstrap > /dev/null; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap > /dev/null
    fi
    ;;
  start)
    dockerd --bridge=none --iptables=false --ip-masq=false > "$2" 2>&1 &
    pid=$!
    for _ in $(seq 1 150); do
      # Ours must be alive: another daemon answering would not make this one's pid right.
      kill -0 "$pid" 2> /dev/null || break
      if docker info > /dev/null 2>&1; then echo "$pid"; exit 0; fi
      sleep 0.2
    done
    echo "dockerd did not start; the end of $2:" >&2
    tail -n 20 "$2" >&2
    kill "$pid" 2> /dev/null || true
    exit 1
    ;;
  stop)
    kill "$2" 2> /dev/null || exit 0
    for _ in $(seq 1 40); do kill -0 "$2" 2> /dev/null || exit 0; sleep 0.5; done
    kill -KILL "$2" 2> /dev/null || true
    ;;
  *)
    echo "usage: tests/docker.sh install | start LOG | stop PID" >&2
    exit 2
    ;;
esac
