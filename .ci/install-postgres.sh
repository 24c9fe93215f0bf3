#!/usr/bin/env bash
# Install PostgreSQL 15 and build pgvector from source, for the postgres storage tests.
#
# Idempotent: does nothing when the server binaries and the vector extension are already installed.
# Debian bookworm ships PostgreSQL 15 but no pgvector binary package, so we take pgvector's source package from the
# next Debian release (trixie) through a temporary deb-src entry and build it against postgresql-server-dev-15.
# OPTFLAGS="" keeps the build portable: the upstream default adds -march=native, and prebuilt AVX-512 builds crash the
# server on CPUs without it. Needs root (apt-get); CI runs as root.
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PG_BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
EXT_DIR="/usr/share/postgresql/${PG_MAJOR}/extension"

have_vector() { [ -f "${EXT_DIR}/vector.control" ] && [ -f "/usr/lib/postgresql/${PG_MAJOR}/lib/vector.so" ]; }

if [ -x "${PG_BIN}/initdb" ] && have_vector; then
    echo "install-postgres: PostgreSQL ${PG_MAJOR} with pgvector already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

${SUDO} apt-get update -qq
${SUDO} apt-get install -y -qq --no-install-recommends \
    "postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}" build-essential dpkg-dev ca-certificates >/dev/null

if ! have_vector; then
    SRC_LIST="/etc/apt/sources.list.d/engramdb-trixie-src.list"
    WORK="$(mktemp -d)"
    chmod 755 "${WORK}"  # apt-get source downloads as the _apt user
    # Remove the temporary source entry whatever happens, so the machine's apt config is left as we found it.
    cleanup() {
        ${SUDO} rm -f "${SRC_LIST}"
        ${SUDO} apt-get update -qq || true
        rm -rf "${WORK}"
    }
    trap cleanup EXIT
    echo "deb-src http://deb.debian.org/debian trixie main" | ${SUDO} tee "${SRC_LIST}" >/dev/null
    ${SUDO} apt-get update -qq
    # apt-get source only downloads and unpacks (no build deps, no binary packages from trixie are installed).
    (cd "${WORK}" && apt-get source -qq pgvector >/dev/null)
    SRC_DIR="$(find "${WORK}" -maxdepth 1 -mindepth 1 -type d -name 'pgvector-*' | head -n 1)"
    if [ -z "${SRC_DIR}" ]; then
        echo "install-postgres: pgvector source package not found" >&2
        exit 1
    fi
    make -s -C "${SRC_DIR}" OPTFLAGS="" PG_CONFIG="${PG_BIN}/pg_config" >/dev/null
    ${SUDO} make -s -C "${SRC_DIR}" OPTFLAGS="" PG_CONFIG="${PG_BIN}/pg_config" install >/dev/null
fi

if ! have_vector; then
    echo "install-postgres: pgvector did not install" >&2
    exit 1
fi
echo "install-postgres: PostgreSQL ${PG_MAJOR} with pgvector ready"
