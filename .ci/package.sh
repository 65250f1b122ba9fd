#!/usr/bin/env bash
# The Debian package as an operator installs it (docs/deployment.md): built by cargo-deb, its
# unit checked by systemd-analyze, installed with dpkg, then a payment made through the
# installed binary run as the unit runs it: its user, its working directory, its Environment=
# and EnvironmentFile=, its ExecStartPre= and ExecStart= command lines. This machine runs no
# systemd, so the unit's sandboxing itself is verified, not exercised.
#
# Usage: .ci/package.sh [dev|release]   (CI packages the debug build it already has; the
# release package is the same files around the release binary: `cargo deb`.)
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
PROFILE="${1:-release}"
TARGET="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
PORT="${PAYD_PACKAGE_PORT:-18080}"

command -v cargo-deb >/dev/null || cargo install --locked --quiet cargo-deb --version 3.6.3
command -v systemd-analyze >/dev/null || apt_install systemd

rm -rf "$TARGET/debian"
if [ "$PROFILE" = release ]; then
    cargo deb --output "$TARGET/debian/"
else
    cargo deb --no-build --no-strip --fast --profile "$PROFILE" --output "$TARGET/debian/"
fi
deb=$(ls "$TARGET"/debian/payd_*.deb)
echo "package: $deb"
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'
dpkg-deb --contents "$deb"

cleanup() {
    [ -n "${server:-}" ] && pkill -KILL -u payd -x payd 2>/dev/null || true
    dpkg --purge payd >/dev/null 2>&1 || true
    rm -rf /var/lib/payd
}
trap cleanup EXIT

dpkg --purge payd >/dev/null 2>&1 || true
rm -rf /var/lib/payd
dpkg -i "$deb"

unit=/usr/lib/systemd/system/payd.service
systemd-analyze verify "$unit"
echo "systemd-analyze verify: clean"

# What the package set up.
test "$(stat -c '%U:%G %a' /var/lib/payd)" = "payd:payd 750"
test "$(stat -c '%U:%G %a' /etc/payd/payd.env)" = "root:payd 640"
getent passwd payd | grep -q ':/usr/sbin/nologin$'

# The operator's step: the secrets in the environment file.
sed -i \
    -e "s|^PAYD_HTTP__PUBLIC_URL=.*|PAYD_HTTP__PUBLIC_URL=https://pay.example.com|" \
    -e "s|^PAYD_SECURITY__KEY_PEPPER=.*|PAYD_SECURITY__KEY_PEPPER=$(head -c 36 /dev/urandom | base64)|" \
    -e "s|^PAYD_ADMIN_KEY=.*|PAYD_ADMIN_KEY=package-admin-key-0123456789|" \
    -e "s|^PAYD_SECURITY__MASTER_KEY=.*|PAYD_SECURITY__MASTER_KEY=$(head -c 32 /dev/urandom | base64)|" \
    /etc/payd/payd.env
echo "PAYD_LISTEN=127.0.0.1:$PORT" >>/etc/payd/payd.env

# The unit's own settings, read from the installed unit.
field() { sed -n "s/^$1=//p" "$unit"; }
user=$(field User)
workdir=$(field WorkingDirectory)
envfile=$(field EnvironmentFile)
environment=$(field Environment)
pre=$(field ExecStartPre)
start=$(field ExecStart)
as_unit() {
    # shellcheck disable=SC2016
    setpriv --reuid="$user" --regid="$user" --init-groups -- env -i PATH=/usr/bin:/bin sh -c \
        'cd "$1" && export $2 && set -a && . "$3" && set +a && shift 3 && exec "$@"' \
        sh "$workdir" "$environment" "$envfile" "$@"
}

# shellcheck disable=SC2086
as_unit $pre
# shellcheck disable=SC2086
as_unit $start &
server=$!
base="http://127.0.0.1:$PORT"
wait_for_url "$base/health/ready"
as_unit /usr/bin/payd health
create_merchant "$base" package-admin-key-0123456789
read -r _ status < <(pay "$base" 1250)
echo "payment through the installed unit's command line: $status"
test "$status" = succeeded
# The database is where the package said, owned by the unit's user.
test "$(stat -c '%U' /var/lib/payd/payd.db)" = payd

# SIGTERM to payd itself (the shell job is its parent), as systemd's stop sends it.
pkill -TERM -u "$user" -x payd
wait "$server"
server=
echo "package: installed, verified, paid through, stopped cleanly"
