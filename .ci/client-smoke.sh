#!/usr/bin/env bash
# Client generation check: generates a Python client from a running payd's /openapi.json with
# openapi-python-client (pinned, from PyPI) and runs .ci/client_smoke.py through it: a merchant
# (admin route), a payment with manual capture confirmed with a test card, its capture, a
# partial refund, and the merchant's events, through the generated functions and models only.
# Fails when the generator cannot handle an operation the smoke test needs, or when the client
# cannot parse one of payd's answers (a schema in the document that does not match payd).
# The generator's warnings about other parts of the document are printed, not fatal.
#
# Usage: .ci/client-smoke.sh [PAYD_BINARY]   (default: target/debug/payd, or under
# $CARGO_TARGET_DIR). Builds nothing. Runs on a fresh Debian clone and installs what it needs
# itself (sudo only when not root): python3-venv and curl if missing, then the generator and
# the generated client into a virtual environment in a temporary directory. payd runs on a
# free loopback port with a temporary SQLite database, and is stopped at exit. A failed run
# keeps that directory (payd's log, the document, the generated client) and says where.
set -euo pipefail
cd "$(dirname "$0")/.."

GENERATOR_VERSION="${CLIENT_SMOKE_GENERATOR_VERSION:-0.29.1}"
BIN="${1:-${CARGO_TARGET_DIR:-target}/debug/payd}"
ADMIN_KEY="client-smoke-admin-$RANDOM$RANDOM$RANDOM"
# What the smoke test calls: method, path, and the generated module (api/<tag>/<operation>).
NEEDED=(
    "GET /health/live operations/live"
    "POST /admin/merchants admin/create_merchant"
    "POST /payments payments/create_payment"
    "POST /payments/{payment_id}/confirm payments/confirm_payment"
    "POST /payments/{payment_id}/capture payments/capture_payment"
    "POST /refunds refunds/create_refund"
    "POST /events/{merchant_id} events/list_events"
)

step() { printf '\n==> %s\n' "$*"; }
die() {
    echo "client smoke: $*" >&2
    exit 1
}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
APT_UPDATED=""
apt_install() {
    if [ -z "$APT_UPDATED" ]; then
        as_root apt-get update -qq
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

[ -x "$BIN" ] || die "no payd binary at $BIN (build it first: cargo build --bin payd)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-client-smoke.XXXXXX")
SERVER_PID=""

stop_server() {
    [ -n "$SERVER_PID" ] || return 0
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        # A graceful drain first (bounded: 10 s), then SIGKILL.
        for _ in $(seq 1 100); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

cleanup() {
    local rc=$?
    stop_server
    if [ "$rc" -ne 0 ]; then
        if [ -s "$WORK/server.log" ]; then
            echo "--- payd's errors and warnings ---" >&2
            grep -E '"level":"(ERROR|WARN)"' "$WORK/server.log" | tail -n 40 >&2 || true
        fi
        echo "client smoke: failed; payd's log, the document and the generated client stay in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "tools: python3 with openapi-python-client $GENERATOR_VERSION (virtual environment in $WORK)"
command -v python3 >/dev/null 2>&1 || apt_install python3
command -v curl >/dev/null 2>&1 || apt_install curl
if ! python3 -m venv "$WORK/venv" >/dev/null 2>&1; then
    # Debian's python3 has no ensurepip without python3-venv.
    rm -rf "$WORK/venv"
    apt_install python3-venv
    python3 -m venv "$WORK/venv"
fi
PY="$WORK/venv/bin/python"
timeout 600 "$PY" -m pip install -q --disable-pip-version-check --timeout 60 \
    "openapi-python-client==$GENERATOR_VERSION"
"$PY" --version
"$WORK/venv/bin/openapi-python-client" --version

step "start payd ($BIN)"
# A clean environment: only what this run sets. `127.0.0.1:0` picks a free port, which payd
# announces in its log.
env -i PATH="$PATH" HOME="${HOME:-/tmp}" \
    PAYD_LISTEN=127.0.0.1:0 \
    PAYD_DATABASE_URL="sqlite://$WORK/payd.db?mode=rwc" \
    PAYD_ADMIN_KEY="$ADMIN_KEY" \
    PAYD_SANDBOX__DEMO_MERCHANT=false \
    PAYD_SANDBOX__DATA_DIR="$WORK/data" \
    PAYD_LOG__FORMAT=json \
    "$BIN" serve >"$WORK/server.out" 2>"$WORK/server.log" &
SERVER_PID=$!

PORT=""
for _ in $(seq 1 600); do # 60 s
    PORT=$(grep -m 1 '"message":"payd listening"' "$WORK/server.log" 2>/dev/null |
        sed -n 's/.*"port":\([0-9][0-9]*\).*/\1/p' || true)
    [ -n "$PORT" ] && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "payd exited before listening:" >&2
        cat "$WORK/server.log" >&2
        exit 1
    fi
    sleep 0.1
done
[ -n "$PORT" ] || die "payd did not announce its port within 60 s"
BASE="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do # 10 s
    curl -fsS -o /dev/null --max-time 2 "$BASE/health/live" 2>/dev/null && break
    sleep 0.1
done
curl -fsS -o /dev/null --max-time 2 "$BASE/health/live" || die "GET $BASE/health/live did not answer within 10 s"
echo "payd listens on $BASE"

step "generate the client from $BASE/openapi.json"
curl -fsS --max-time 20 -o "$WORK/openapi.json" "$BASE/openapi.json"
# No post hooks: they would run ruff, which formats the code and changes nothing it does.
printf 'post_hooks: []\n' >"$WORK/generator.yml"
if ! (cd "$WORK" && COLUMNS=120 timeout 300 "$WORK/venv/bin/openapi-python-client" generate \
    --path openapi.json --config generator.yml --meta pdm --output-path payd-client \
    >generator.log 2>&1); then
    cat "$WORK/generator.log" >&2
    die "openapi-python-client could not generate a client from /openapi.json"
fi
if grep -q 'WARNING' "$WORK/generator.log"; then
    echo "--- the generator's warnings: parts of /openapi.json it could not handle ---"
    cat "$WORK/generator.log"
    echo "--- (end of the generator's warnings) ---"
    grep -E '^WARNING' "$WORK/generator.log" | sed 's/^/  /'
fi
PKG="$WORK/payd-client/payd_client"
[ -d "$PKG" ] || die "the generator wrote no package payd_client (see $WORK/generator.log)"
missing=0
for op in "${NEEDED[@]}"; do
    read -r method path module <<<"$op"
    if grep -qF "WARNING parsing $method $path within" "$WORK/generator.log"; then
        echo "the generator could not handle $method $path, which the smoke test needs" >&2
        missing=1
    fi
    if [ ! -f "$PKG/api/$module.py" ]; then
        echo "the generated client has no $method $path (api/$module.py)" >&2
        missing=1
    fi
done
[ "$missing" -eq 0 ] || die "operations the smoke test needs are missing from the generated client"
echo "the client has all ${#NEEDED[@]} operations the smoke test needs"

step "install the generated client and its dependencies"
timeout 600 "$PY" -m pip install -q --disable-pip-version-check --timeout 60 "$WORK/payd-client"
"$PY" -m pip list --disable-pip-version-check 2>/dev/null | grep -iE '^(payd-client|httpx|attrs) '

step "smoke test through the generated client (.ci/client_smoke.py)"
timeout 120 "$PY" .ci/client_smoke.py "$BASE" "$ADMIN_KEY"
