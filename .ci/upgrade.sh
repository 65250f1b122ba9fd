#!/usr/bin/env bash
# An upgrade and a rollback across one release, with the real binaries (docs/upgrading.md):
# the previous release (built from its tag, or its commit when the clone has no tags) takes a
# payment on a fresh database; this release migrates it, serves that payment and takes
# another; then the previous release is started on the migrated database and what it does is
# printed and checked. Both binaries share CI's target directory, so only payd's own crates
# (and the patched sqlx under vendor/) are built again.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
PREVIOUS_TAG=v0.1.0
PREVIOUS_COMMIT=fa03244
TARGET="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
SRC="$TARGET/upgrade/src"
# lib.sh's start_payd keeps payd's database, data and log in $WORK.
WORK="$TARGET/upgrade/run"
ADMIN=upgrade-admin-key-0123456789

rev=$(git rev-parse --verify -q "$PREVIOUS_TAG^{commit}" || git rev-parse --verify -q "$PREVIOUS_COMMIT^{commit}") || {
    echo "upgrade check: this clone has neither $PREVIOUS_TAG nor $PREVIOUS_COMMIT (a shallow clone? git fetch --unshallow)" >&2
    exit 1
}
previous="$TARGET/previous/payd-$PREVIOUS_TAG"
if [ ! -x "$previous" ]; then
    rm -rf "$SRC" && git worktree prune
    git worktree add --detach "$SRC" "$rev" >/dev/null
    (cd "$SRC" && CARGO_TARGET_DIR="$TARGET" cargo build --quiet --bin payd)
    mkdir -p "$TARGET/previous" && cp "$TARGET/debug/payd" "$previous"
    git worktree remove --force "$SRC"
    # The current build's binary back in its place.
    cargo build --quiet --bin payd
fi
current="$TARGET/debug/payd"
"$previous" --version
"$current" --version

rm -rf "$WORK" && mkdir -p "$WORK"
db="sqlite://$WORK/payd.db?mode=rwc"
SERVER_PID=""
trap stop_server EXIT
# `BINARY serve` on the database, until it announces its port and is ready: sets base.
start() {
    start_payd "$1" "$ADMIN"
    wait_for_port
    base="http://127.0.0.1:$PORT"
    wait_for_url "$base/health/ready"
}

# The previous release: a merchant and a payment.
start "$previous"
create_merchant "$base" "$ADMIN"
read -r before _ < <(pay "$base" 700)
stop_server
echo "previous release: payment $before"

# The backup docs/upgrading.md asks for before an upgrade (the previous release has no
# `payd backup`; this one's copies any schema and migrates nothing).
env -i PATH="$PATH" PAYD_DATABASE_URL="$db" "$current" backup --to "$WORK/before-upgrade.db"

# The upgrade: this release migrates with the database URL alone, then serves.
env -i PATH="$PATH" PAYD_MODE=production PAYD_DATABASE_URL="$db" "$current" migrate
start "$current"
status=$(curl -fsS "$base/payments/$before" -H "api-key: $KEY" | json_field status)
test "$status" = succeeded
read -r after _ < <(pay "$base" 700)
stop_server
echo "this release: the previous release's payment is $status; payment $after"

# The rollback: the previous release on the migrated database.
set +e
out=$(timeout 60 env -i PATH="$PATH" PAYD_DATABASE_URL="$db" PAYD_LISTEN=127.0.0.1:0 "$previous" serve 2>&1)
code=$?
set -e
echo "previous release on the migrated database: exit $code: $out"
test "$code" -ne 0
grep -q "m20261206_000036_create_schema_compatibility" <<<"$out"

# The rollback docs/upgrading.md gives for it: the backup restored, the previous release
# serves what it had; what only the new release wrote is gone with the window.
rm -f "$WORK/payd.db" "$WORK/payd.db-wal" "$WORK/payd.db-shm"
cp "$WORK/before-upgrade.db" "$WORK/payd.db"
start "$previous"
status=$(curl -fsS "$base/payments/$before" -H "api-key: $KEY" | json_field status)
test "$status" = succeeded
lost=$(curl -sS -o /dev/null -w '%{http_code}' "$base/payments/$after" -H "api-key: $KEY")
test "$lost" = 404
stop_server
echo "rollback by restoring the backup: the previous release serves $before ($status); $after, made after the backup, is gone ($lost)"
echo "upgrade and rollback: as docs/upgrading.md says"
