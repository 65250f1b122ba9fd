#!/usr/bin/env bash
# Schema fuzzing: runs schemathesis against a private payd (debug build, temporary SQLite
# database, no webhook endpoint) as a fresh merchant, and fails when an answer is a 5xx or
# contradicts /openapi.json (status code, content type, body schema, headers), or when a 405
# does not say which methods are allowed.
#
# Installs what it needs itself: a virtual environment in .ci/.venv (gitignored, reused by
# later runs) with a pinned schemathesis. Bounded in time: SCHEMATHESIS_MAX_TIME seconds of
# testing (default 180), at most SCHEMATHESIS_MAX_EXAMPLES cases per operation and phase
# (default 50). A failed run prints its seed; SCHEMATHESIS_SEED=<seed> replays it.
# SCHEMATHESIS_CHECKS=all adds the checks that also judge what is accepted or refused.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION="${SCHEMATHESIS_VERSION:-4.32.5}"
MAX_TIME="${SCHEMATHESIS_MAX_TIME:-180}"
MAX_EXAMPLES="${SCHEMATHESIS_MAX_EXAMPLES:-50}"
# No 5xx; status codes, content types, bodies and headers as documented; 405 with `Allow`
# for a method a path does not take.
CHECKS="${SCHEMATHESIS_CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,unsupported_method}"
VENV=.ci/.venv
ADMIN_KEY="schemathesis-admin-$RANDOM$RANDOM$RANDOM"
BIN="${CARGO_TARGET_DIR:-target}/debug/payd"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-schemathesis.XXXXXX")
SERVER_PID=""
FUZZER_PID=""

cleanup() {
    local rc=$?
    # `timeout` runs schemathesis in a process group of its own: a Ctrl-C does not reach it.
    if [ -n "$FUZZER_PID" ]; then
        kill -TERM "$FUZZER_PID" 2>/dev/null || true
        wait "$FUZZER_PID" 2>/dev/null || true
    fi
    stop_server
    if [ "$rc" -ne 0 ] && [ -s "$WORK/server.log" ]; then
        echo "--- payd's errors and warnings (its whole log, the config and the report stay in $WORK) ---" >&2
        show_server_problems
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "python virtual environment ($VENV, schemathesis $SCHEMATHESIS_VERSION)"
missing=()
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
command -v curl >/dev/null || missing+=(curl)
command -v jq >/dev/null || missing+=(jq)
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -qF "version $SCHEMATHESIS_VERSION"; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "schemathesis==$SCHEMATHESIS_VERSION"
fi
"$VENV/bin/schemathesis" --version

step "cargo build --bin payd"
cargo build --bin payd

step "start payd"
# A clean environment: only what this run sets (RUST_LOG or a developer's PAYD_* would change
# it). No webhook endpoint or remote processor may point into this machine. One key sends
# every request, so the per-key rate limit is off (it has its own test), lest 429s hide what
# the fuzzer is after.
start_payd "$BIN" "$ADMIN_KEY" \
    PAYD_LIMITS__REQUESTS_PER_SECOND=0 \
    PAYD_WEBHOOKS__ALLOW_PRIVATE_URLS=false \
    PAYD_PROCESSORS__ALLOW_PRIVATE_URLS=false \
    PAYD_WEBHOOKS__REQUEST_TIMEOUT_SECS=2
if ! wait_for_port; then
    echo "payd did not announce its port within 60 s" >&2
    exit 1
fi
BASE="http://127.0.0.1:$PORT"
wait_for_url "$BASE/health/ready"
echo "payd listens on $BASE"

# api METHOD PATH [BODY]: a request with the key in $KEY (default: the merchant's secret key)
# and the merchant's first shop; prints the answer; fails, showing it, on a non-2xx.
api() {
    local args=(-sS --max-time 20 -o "$WORK/answer" -w '%{http_code}' -X "$1" "$BASE$2")
    args+=(-H "api-key: ${KEY:-$SECRET_KEY}")
    [ -n "${PROFILE_ID:-}" ] && args+=(-H "x-profile-id: $PROFILE_ID")
    [ -n "${3:-}" ] && args+=(-H 'content-type: application/json' -d "$3")
    local status
    status=$(curl "${args[@]}")
    if [ "${status:0:1}" != 2 ]; then
        echo "$1 $2 answered $status: $(cat "$WORK/answer")" >&2
        return 1
    fi
    cat "$WORK/answer"
}
pay() { # pay AMOUNT CARD [MORE JSON FIELDS]
    api POST /payments "{\"amount\": $1, \"currency\": \"USD\", \"confirm\": true, ${3:-}
        \"payment_method_data\": {\"card\": {\"number\": \"$2\", \"exp_month\": 12,
        \"exp_year\": 2035, \"cvc\": \"123\"}}}"
}

step "a merchant, and objects for the fuzzer to find"
MERCHANT=$(KEY=$ADMIN_KEY api POST /admin/merchants '{"name": "Schemathesis"}')
SECRET_KEY=$(jq -er .secret_key <<<"$MERCHANT")
MERCHANT_ID=$(jq -er .merchant_id <<<"$MERCHANT")
PROFILE_ID=$(jq -er .profile_id <<<"$MERCHANT")
SHOP_B=$(api POST /account/shops '{"name": "Second shop"}' | jq -er .profile_id)
# The route that revokes keys gets a key bound to the second shop: it can revoke keys of that
# shop only (itself included), never the merchant-wide key that every other request uses.
BOUND_KEY=$(api POST /account/api-keys "{\"kind\": \"secret\", \"profile_id\": \"$SHOP_B\"}" | jq -er .key)
AUTHORIZED=$(pay 2000 4242424242424242 '"capture_method": "manual",')
SUCCEEDED=$(pay 3000 5555555555554444 \
    '"lines": [{"name": "Book", "quantity": 2, "unit_amount": 1500}],')
OPEN=$(api POST /payments '{"amount": 1500, "currency": "USD"}')
CUSTOMER_ID=$(api POST /customers '{"name": "Ada", "email": "ada@example.com"}' |
    jq -er .customer_id)
SAVED=$(pay 1000 4000000000000259 \
    "\"customer_id\": \"$CUSTOMER_ID\", \"setup_future_usage\": \"off_session\",")
PAYMENT_IDS=$(jq -sc 'map(.payment_id)' <<<"$AUTHORIZED $SUCCEEDED $OPEN $SAVED")
REFUND_ID=$(api POST /refunds "{\"payment_id\": $(jq .payment_id <<<"$SUCCEEDED"), \"amount\": 500}" |
    jq -er .refund_id)
MANDATE_ID=$(jq -er .mandate_id <<<"$SAVED")
METHOD_ID=$(api GET "/customers/$CUSTOMER_ID/payment-methods" | jq -er '.data[0].payment_method_id')
EVENT_IDS=$(api POST "/events/$MERCHANT_ID" '{"limit": 5}' | jq -ec '[.data[].event_id] | select(length > 0)')
CLIENT_SECRET=$(jq -er .client_secret <<<"$OPEN")
# Invoices: a draft, a finalized one with a share link, and a credit note of it.
DRAFT_ID=$(api POST /invoices '{"currency": "EUR", "lines": [{"name": "Tea", "quantity": 2, "unit_amount": 450}]}' |
    jq -er .invoice_id)
ISSUED_ID=$(api POST /invoices '{"currency": "EUR", "lines": [{"line_id": "cup", "name": "Cup", "quantity": 4, "unit_amount": 1200}]}' |
    jq -er .invoice_id)
api POST "/invoices/$ISSUED_ID/finalize" '{}' >/dev/null
SHARED=$(api POST "/invoices/$ISSUED_ID/share-link" '{}')
SHARE_TOKEN=$(jq -er .url <<<"$SHARED")
SHARE_TOKEN=${SHARE_TOKEN##*/}
LINK_ID=$(jq -er .link_id <<<"$SHARED")
# Payouts: one waiting for confirmation, one reserved (the shop has captured funds above).
PAYOUT_NEW=$(api POST /payouts/create '{"amount": 100, "currency": "USD", "destination": {"bank_account": {"account_number": "000123456789", "holder_name": "Ada"}}}' |
    jq -er .payout_id)
PAYOUT_HELD=$(api POST /payouts/create '{"amount": 100, "currency": "USD", "confirm": true, "destination": {"bank_account": {"account_number": "000222222226", "holder_name": "Ada"}}}' |
    jq -er .payout_id)
NOTE_ID=$(api POST "/invoices/$ISSUED_ID/credit-note" '{"lines": [{"line_id": "cup", "quantity": 1}], "reason": "broken"}' |
    jq -er .invoice_id)
echo "merchant $MERCHANT_ID, shops $PROFILE_ID $SHOP_B, payments $PAYMENT_IDS"

# Every request carries the merchant's key and shop (generated security parameters are off);
# the admin route gets the admin key, the key-revoking route the shop-bound key. Most of the
# time an id is one of the objects above rather than a generated string, so that the fuzzer
# gets past 404 into the handlers; the same goes for a few body fields.
cat >"$WORK/schemathesis.toml" <<TOML
headers = { "api-key" = "$SECRET_KEY", "x-profile-id" = "$PROFILE_ID" }

[generation]
with-security-parameters = false

[parameters]
"path.payment_id" = { dictionary = "payments", probability = 0.6 }
"path.refund_id" = { dictionary = "refunds", probability = 0.6 }
"path.customer_id" = { dictionary = "customers", probability = 0.6 }
"path.payment_method_id" = { dictionary = "methods", probability = 0.6 }
"path.mandate_id" = { dictionary = "mandates", probability = 0.6 }
"path.profile_id" = { dictionary = "shops", probability = 0.8 }
"path.merchant_id" = { dictionary = "merchants", probability = 0.8 }
"path.event_id" = { dictionary = "events", probability = 0.6 }
"path.invoice_id" = { dictionary = "invoices", probability = 0.6 }
"path.payout_id" = { dictionary = "payouts", probability = 0.6 }
"path.link_id" = { dictionary = "links", probability = 0.6 }
"path.token" = { dictionary = "share_tokens", probability = 0.6 }
"query.client_secret" = { dictionary = "client_secrets", probability = 0.6 }
"body.client_secret" = { dictionary = "client_secrets", probability = 0.6 }
"body.payment_id" = { dictionary = "payments", probability = 0.6 }
"body.currency" = { dictionary = "currencies", probability = 0.5 }
"body.payment_method_data.card.number" = { dictionary = "cards", probability = 0.5 }
"body.card.number" = { dictionary = "cards", probability = 0.5 }

[dictionaries]
payments = { values = $PAYMENT_IDS }
refunds = { values = ["$REFUND_ID"] }
customers = { values = ["$CUSTOMER_ID"] }
methods = { values = ["$METHOD_ID"] }
mandates = { values = ["$MANDATE_ID"] }
shops = { values = ["$PROFILE_ID", "$SHOP_B"] }
merchants = { values = ["$MERCHANT_ID"] }
events = { values = $EVENT_IDS }
invoices = { values = ["$DRAFT_ID", "$ISSUED_ID", "$NOTE_ID"] }
payouts = { values = ["$PAYOUT_NEW", "$PAYOUT_HELD"] }
links = { values = ["$LINK_ID"] }
share_tokens = { values = ["$SHARE_TOKEN"] }
open_payments = { values = [$(jq .payment_id <<<"$OPEN")] }
client_secrets = { values = ["$CLIENT_SECRET"] }
currencies = { values = ["USD", "EUR", "JPY", "usd"] }
cards = { values = ["4242424242424242", "4000000000000002", "4000000000003220", "4000000000000093", "4000000000000119", "4000000000000101", "4000000000000036", "4000000000000341"] }

[[operations]]
include-path = "/admin/merchants"
headers = { "api-key" = "$ADMIN_KEY" }

[[operations]]
include-path = "/account/api-keys/{key_id}"
headers = { "api-key" = "$BOUND_KEY", "x-profile-id" = "$SHOP_B" }

# The buyer's routes: the client_secret opens only the payment it belongs to.
[[operations]]
include-path-regex = "^/checkout/"
parameters = { "path.payment_id" = { dictionary = "open_payments", probability = 0.8 } }
TOML

step "schemathesis run ($MAX_TIME s, at most $MAX_EXAMPLES cases per operation and phase)"
seed=()
[ -n "${SCHEMATHESIS_SEED:-}" ] && seed=(--seed "$SCHEMATHESIS_SEED")
# One worker: workers are threads, and `ast.parse` in several threads at once can fail in
# CPython 3.11 ("AST constructor recursion depth mismatch", reported as a schemathesis error).
# Run from $WORK, where hypothesis and schemathesis leave their caches, and in the background,
# so that a signal to this script is handled at once (a trap waits for a foreground command).
VENV_ABS=$(cd "$VENV" && pwd)
(cd "$WORK" && exec timeout --kill-after=30 $((MAX_TIME + 120)) \
    "$VENV_ABS/bin/schemathesis" --config-file "$WORK/schemathesis.toml" --no-color run \
    "$BASE/openapi.json" \
    --checks "$CHECKS" \
    --max-examples "$MAX_EXAMPLES" \
    --max-time "$MAX_TIME" \
    --request-timeout 30 \
    --workers 1 \
    --generation-database none \
    --report junit --report-dir "$WORK/report" \
    "${seed[@]}") &
FUZZER_PID=$!
wait "$FUZZER_PID"
FUZZER_PID=""
step "schemathesis found nothing"
