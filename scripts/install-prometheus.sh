#!/usr/bin/env bash
# Installs Debian's `prometheus` package for the release-gate integration tests, which start their
# own server on loopback: only /usr/bin/prometheus and /usr/bin/promtool are needed. Idempotent:
# does nothing when both binaries exist. The package's own service is never left running.
set -euo pipefail

log() { printf '[install-prometheus] %s\n' "$*" >&2; }

if [[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]]; then
  log "already installed: $(/usr/bin/prometheus --version 2>&1 | head -n1)"
  exit 0
fi

if [[ $EUID -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null; then
  as_root=(sudo)
else
  log "need root to apt-get install prometheus: re-run as root or install sudo"
  exit 1
fi

# Without systemd, invoke-rc.d consults policy-rc.d: deny service starts during the install.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  "${as_root[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
  trap '"${as_root[@]}" rm -f "$policy"' EXIT
fi

log "apt-get update"
"${as_root[@]}" apt-get update -qq
log "apt-get install prometheus"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null

# The package enables its service; the tests run their own server, so stop and disable it.
if [[ -d /run/systemd/system ]]; then
  "${as_root[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
elif [[ -x /etc/init.d/prometheus ]]; then
  "${as_root[@]}" /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi

for bin in /usr/bin/prometheus /usr/bin/promtool; do
  [[ -x $bin ]] || { log "$bin missing after install: check 'dpkg -L prometheus'"; exit 1; }
done
log "installed: $(/usr/bin/prometheus --version 2>&1 | head -n1)"
