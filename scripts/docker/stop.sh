#!/usr/bin/env bash
# Stops the Docker Engine that scripts/docker/start.sh started, by its pid file. Idempotent.
# Its data root (images, stopped containers) stays, so the next start reuses the test images.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${HARNESS_SESSIONS_DOCKER_DIR:-$repo/.cache/docker}"
pidfile="$dir/docker.pid"

if [ ! -f "$pidfile" ]; then
  echo "docker/stop: no daemon of ours is running ($pidfile is absent)" >&2
  exit 0
fi
pid="$(cat "$pidfile")"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "docker/stop: dockerd $pid did not stop in 15 s; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
fi
rm -f "$pidfile" "$dir/docker.sock"
echo "docker/stop: stopped" >&2
