#!/usr/bin/env bash
# Builds the test image of harness-sessions on the local Docker Engine, without any registry:
# busybox-static laid out in a root folder, a non-root user `sandbox` (uid and gid 1000) with its
# home /home/sandbox and a working directory /workspace, imported with `docker import`.
#
#   scripts/docker/build-test-image.sh [image]    # default image: harness-sessions-test:busybox
#
# Uses DOCKER_HOST when set, else the daemon of scripts/docker/start.sh. Idempotent: an image
# already present is kept (set HARNESS_SESSIONS_REBUILD_IMAGE=1 to build it again).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
image="${1:-harness-sessions-test:busybox}"
dir="${HARNESS_SESSIONS_DOCKER_DIR:-$repo/.cache/docker}"
export DOCKER_HOST="${DOCKER_HOST:-unix://$dir/docker.sock}"
log() { echo "docker/build-test-image: $*" >&2; }

if ! command -v docker >/dev/null 2>&1; then
  log "the docker CLI is missing: run scripts/docker/start.sh first (it installs docker.io)"
  exit 1
fi
if [ "${HARNESS_SESSIONS_REBUILD_IMAGE:-0}" != 1 ] && docker image inspect "$image" >/dev/null 2>&1; then
  log "$image is already there"
  exit 0
fi

busybox=/bin/busybox
if ! [ -x "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1 || ldd "$busybox" >/dev/null 2>&1; then
  # Debian's busybox-static installs a static /bin/busybox.
  log "installing busybox-static (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends busybox-static >&2 ||
    { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends busybox-static >&2; }
fi

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/home/sandbox" "$root/workspace" "$root/root" \
  "$root/proc" "$root/sys" "$root/dev" "$root/usr/bin" "$root/sbin" "$root/usr/sbin"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GROUP
chmod 1777 "$root/tmp"
chown -R 1000:1000 "$root/home/sandbox" "$root/workspace"
chmod 700 "$root/root"

log "importing $image"
tar -C "$root" --numeric-owner -c . | docker import \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /workspace' \
  --change 'ENV HOME=/home/sandbox PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/sh"]' \
  - "$image" >/dev/null
log "built $image"
