#!/usr/bin/env bash
# Install the other servers and programs the integration tests start themselves: Redis (shared sessions) and
# headless Chromium (the web dashboard's browser tests). Idempotent; needs root (CI runs as root).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-services: redis-server and chromium already installed"
    exit 0
fi
${SUDO} apt-get update -qq
${SUDO} apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package starts a system-wide Redis on 6379; the tests start their own on a free port, so stop it.
if [ -x /usr/sbin/service ]; then ${SUDO} service redis-server stop >/dev/null 2>&1 || true; fi
echo "install-services: installed ${missing[*]}"
