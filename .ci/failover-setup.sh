#!/usr/bin/env bash
# What the PostgreSQL failover test (tests/api/failover.rs) needs on a Debian machine: Debian's
# pg_auto_failover (the monitor's extension and pg_autoctl) and, because pg_autoctl refuses
# to run as root, an unprivileged user to run the formation's nodes as (the test runs them
# with runuser). Idempotent; run as root.
set -euo pipefail

user="${PAYD_FAILOVER_USER:-paydha}"
version=$(ls /usr/lib/postgresql | sort -n | tail -n 1)

if ! command -v pg_autoctl >/dev/null 2>&1 ||
    [ ! -e "/usr/share/postgresql/$version/extension/pgautofailover.control" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "postgresql-$version-auto-failover" pg-auto-failover-cli >/dev/null
fi

if ! id -u "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /usr/sbin/nologin "$user"
fi
# The socket directory /var/run/postgresql belongs to the postgres group; the nodes put
# their lock files there.
usermod -aG postgres "$user"

pg_autoctl --version | head -n 1
