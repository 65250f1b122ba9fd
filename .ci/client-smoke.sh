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
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
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

die() {
    echo "client smoke: $*" >&2
    exit 1
}

[ -x "$BIN" ] || die "no payd binary at $BIN (build it first: cargo build --bin payd)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-client-smoke.XXXXXX")
SERVER_PID=""

cleanup() {
    local rc=$?
    stop_server
    if [ "$rc" -ne 0 ]; then
        if [ -s "$WORK/server.log" ]; then
            echo "--- payd's errors and warnings ---" >&2
            show_server_problems
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
command -v curl >/dev/null 2>&1 || apt_install curl
make_venv "$WORK/venv"
PY="$WORK/venv/bin/python"
timeout 600 "$PY" -m pip install -q --disable-pip-version-check --timeout 60 \
    "openapi-python-client==$GENERATOR_VERSION"
"$PY" --version
"$WORK/venv/bin/openapi-python-client" --version

step "start payd ($BIN)"
# A clean environment: only what this run sets, on a free port that payd announces in its log.
start_payd "$BIN" "$ADMIN_KEY"
wait_for_port || die "payd did not announce its port within 60 s"
BASE="http://127.0.0.1:$PORT"
wait_for_url "$BASE/health/live" || die "GET $BASE/health/live did not answer within 10 s"
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
