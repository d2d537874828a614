#!/usr/bin/env bash
# Start a real Docker engine for the tests, on a Debian 12 (bookworm) machine where
# you are root, with no systemd and no container registry (CI, and these dev
# machines). Adapted from the workplace's docker engine recipe.
#
#   scripts/docker-engine.sh up     install docker.io, start dockerd in the background,
#                                   build local base images without pulling, smoke-test
#   scripts/docker-engine.sh down   stop the dockerd that this script started
#
# On a machine that already runs Docker, `up` just uses it.
#
# Environment (all optional):
#   DOCKER_STATE    directory for data-root, pidfile and logs  (default /var/lib/docker-ci)
#   BASE_IMAGES     images to build: "busybox", "debian", or both  (default "busybox debian")
#   DEBIAN_INCLUDE  extra packages to debootstrap into local/bookworm:py  (default python3,git)
#   DOCKER_SOCK     API socket  (default /var/run/docker.sock, which is where docker.from_env() looks)
#   DOCKERD_FLAGS   extra dockerd flags for the first attempt, for example "--bridge=none"
#
# Images this creates (built locally, nothing is pulled):
#   local/busybox:latest   about 2 MB, busybox-static only
#   local/bookworm:py      Debian minbase with python3 and git, plus the host's CA bundle
#                          so that apt, pip and HTTPS work through the egress proxy
set -euo pipefail

STATE=${DOCKER_STATE:-/var/lib/docker-ci}
SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
BASE_IMAGES=${BASE_IMAGES:-busybox debian}
DEBIAN_INCLUDE=${DEBIAN_INCLUDE:-python3,git}
PIDFILE=$STATE/dockerd.pid
export DOCKER_HOST=unix://$SOCK
export DEBIAN_FRONTEND=noninteractive

log() { printf '[recipe %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

mirror() {  # the Debian mirror that apt already uses
  local m
  m=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$m" ] || m=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

install_pkgs() {
  local need=()
  command -v dockerd     >/dev/null || need+=(docker.io)
  [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
  command -v debootstrap >/dev/null || need+=(debootstrap)
  if [ ${#need[@]} -gt 0 ]; then
    log "apt-get install ${need[*]}"
    apt-get update -qq
    # The package's postinst tries to start docker through invoke-rc.d. Without systemd, policy-rc.d usually
    # stops that. If it does start, daemon_ok below finds the running daemon and uses it.
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

daemon_ok() { timeout 5 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start_dockerd() {  # $@ = extra dockerd flags
  mkdir -p "$STATE"
  log "starting dockerd $*"
  setsid nohup dockerd --data-root "$STATE/data" --pidfile "$PIDFILE" -H "unix://$SOCK" "$@" \
      >>"$STATE/dockerd.log" 2>&1 &
  local i
  for i in $(seq 1 150); do            # up to 30 s
    daemon_ok && return 0
    kill -0 $! 2>/dev/null || break    # dockerd exited
    sleep 0.2
  done
  log "dockerd did not come up; last log lines:"; tail -5 "$STATE/dockerd.log" >&2
  stop_dockerd; return 1
}

stop_dockerd() {
  [ -f "$PIDFILE" ] || return 0
  local p; p=$(cat "$PIDFILE")
  if kill -0 "$p" 2>/dev/null; then
    kill "$p"                            # SIGTERM; dockerd stops its containers and its containerd
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
  fi
  rm -f "$PIDFILE"
}

busybox_image() {
  docker image inspect local/busybox:latest >/dev/null 2>&1 && return 0
  local r; r=$(mktemp -d)
  mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,proc,sys,dev}
  cp /bin/busybox "$r/bin/busybox"
  chroot "$r" /bin/busybox --install -s /bin
  echo 'root:x:0:0:root:/root:/bin/sh' >"$r/etc/passwd"; echo 'root:x:0:' >"$r/etc/group"
  tar -C "$r" -c . | docker import -c 'CMD ["/bin/sh"]' - local/busybox:latest >/dev/null
  rm -rf "$r"
}

debian_image() {
  docker image inspect local/bookworm:py >/dev/null 2>&1 && return 0
  local tarball=$STATE/bookworm-py.rootfs.tar
  if [ ! -s "$tarball" ]; then                # cache: debootstrap takes about 1 minute
    local r=$STATE/rootfs.tmp; rm -rf "$r"
    log "debootstrap bookworm (+$DEBIAN_INCLUDE) from $(mirror)"
    debootstrap --variant=minbase --include="$DEBIAN_INCLUDE" bookworm "$r" "$(mirror)" >"$STATE/debootstrap.log" 2>&1
    # Copy the host's CA bundle (it includes the egress-proxy CA) so HTTPS from containers verifies.
    # Also copy the host's local CAs: if a later layer installs the ca-certificates package, its
    # update-ca-certificates rebuilds the bundle from /usr/local/share/ca-certificates and keeps them.
    mkdir -p "$r/etc/ssl/certs" "$r/usr/local/share/ca-certificates"
    cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/ca-certificates.crt"
    cp -r /usr/local/share/ca-certificates/. "$r/usr/local/share/ca-certificates/" 2>/dev/null || true
    chroot "$r" apt-get clean; rm -rf "$r"/var/lib/apt/lists/*
    tar -C "$r" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"; rm -rf "$r"
  fi
  docker import \
    -c 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt PIP_CERT=/etc/ssl/certs/ca-certificates.crt REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt' \
    -c 'CMD ["/bin/bash"]' "$tarball" local/bookworm:py >/dev/null
}

smoke() {
  docker run --rm --network none local/busybox:latest sh -c 'test -d /proc/self && echo container-ok' | grep -q container-ok
}

up() {
  local t0=$SECONDS
  install_pkgs
  if daemon_ok; then
    log "a docker daemon is already reachable at $SOCK; using it"
  else
    # 1st choice: defaults (overlay2 and bridge networking). Fallback: vfs without iptables or bridge.
    # shellcheck disable=SC2086
    if ! { start_dockerd ${DOCKERD_FLAGS:-} && busybox_image && smoke; }; then
      stop_dockerd
      start_dockerd --storage-driver=vfs --iptables=false --bridge=none
    fi
  fi
  for b in $BASE_IMAGES; do
    case $b in busybox) busybox_image ;; debian) debian_image ;; esac
  done
  smoke
  docker info --format 'engine {{.ServerVersion}}  storage={{.Driver}}  cgroup={{.CgroupVersion}}' >&2
  docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^local/' >&2 || true
  log "runtime ready in $((SECONDS - t0)) s (DOCKER_HOST=$DOCKER_HOST)"
}

case ${1:-up} in
  up)   up ;;
  down) stop_dockerd; ip link delete docker0 2>/dev/null || true; log "stopped" ;;
  *)    echo "usage: $0 [up|down]" >&2; exit 2 ;;
esac
