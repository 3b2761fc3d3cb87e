#!/usr/bin/env bash
# Starts a Docker Engine for harness-sessions' tests, installing it first when it is missing.
#
# - Installs Debian's docker.io (apt-get, noninteractive) when `dockerd` is not on the PATH.
# - Runs dockerd with its own data root under the project cache folder (.cache/docker by default,
#   or $HARNESS_SESSIONS_DOCKER_DIR), on a socket of its own, with no bridge and no iptables:
#   containers use `--network none` or `--network host` (loopback).
# - Idempotent: a daemon already answering on that socket is reused.
#
# Prints `DOCKER_HOST=unix://<dir>/docker.sock` on its last line; `eval "$(scripts/docker/start.sh)"`
# exports it. Needs root (it is run as root on CI and on developers' machines).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${HARNESS_SESSIONS_DOCKER_DIR:-$repo/.cache/docker}"
sock="$dir/docker.sock"
log() { echo "docker/start: $*" >&2; }

ping_socket() {
  curl -sf --max-time 2 --unix-socket "$sock" http://docker/_ping >/dev/null 2>&1
}

mkdir -p "$dir"
if ping_socket; then
  log "reusing the daemon already running on $sock"
  echo "export DOCKER_HOST=unix://$sock"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    log "dockerd is not installed and installing it needs root"
    exit 1
  fi
  log "installing docker.io (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends docker.io curl >&2
fi
if ! command -v curl >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends curl >&2
fi

# A daemon of ours that died leaves its pid file and socket behind.
if [ -f "$dir/docker.pid" ]; then
  old="$(cat "$dir/docker.pid" 2>/dev/null || true)"
  if [ -n "$old" ] && kill -0 "$old" 2>/dev/null; then
    log "dockerd $old is running but does not answer on $sock; waiting for it"
  else
    rm -f "$dir/docker.pid" "$sock"
  fi
fi

if [ ! -f "$dir/docker.pid" ]; then
  mkdir -p "$dir/root" "$dir/exec"
  log "starting dockerd (data root $dir/root, log $dir/dockerd.log)"
  # setsid: the daemon outlives this script and is not killed with its process group.
  setsid dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=overlay2 \
    -H "unix://$sock" --data-root "$dir/root" --exec-root "$dir/exec" --pidfile "$dir/docker.pid" \
    </dev/null >"$dir/dockerd.log" 2>&1 &
fi

for _ in $(seq 1 300); do
  if ping_socket; then
    log "dockerd answers on $sock"
    echo "export DOCKER_HOST=unix://$sock"
    exit 0
  fi
  sleep 0.1
done
log "dockerd did not answer on $sock within 30 s; the end of its log:"
tail -n 30 "$dir/dockerd.log" >&2 || true
exit 1
