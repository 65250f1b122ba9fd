#!/usr/bin/env bash
# Client generation check: generates two clients from a running payd's /openapi.json and drives
# a payment's life through each, with the pinned generators merchants are told to use
# (docs/clients.md):
#   Python      openapi-python-client (PyPI), run by .ci/client_smoke.py
#   TypeScript  openapi-typescript types for openapi-fetch (npm), type-checked by tsc, then run
#               by tsx: .ci/client_smoke.ts
# Each one: a merchant (admin route), the shop's webhook endpoint pointed at a receiver inside
# the test, a payment with manual capture confirmed with a test card, its capture, a partial
# refund; then every event delivered to that receiver is verified with the Standard Webhooks
# library of the language (`standardwebhooks`, PyPI and npm) and checked against what the calls
# returned. Fails when a generator cannot handle an operation the smoke tests need, when tsc
# finds the document's types and the script at odds, or when a client cannot parse one of
# payd's answers or delivered events (a schema in the document that does not match payd).
# The Python generator's warnings about other parts of the document are printed, not fatal.
#
# Usage: .ci/client-smoke.sh [PAYD_BINARY]   (default: target/debug/payd, or under
# $CARGO_TARGET_DIR). Builds nothing. Runs on a fresh Debian clone and installs what it needs
# itself (sudo only when not root): python3-venv, curl and Node.js if missing; the Python
# generator, the generated client and standardwebhooks into a virtual environment in a
# temporary directory; the npm packages into $CARGO_TARGET_DIR/client-smoke-npm (kept between
# runs, reinstalled when a pin changes). payd runs on a free loopback port with a temporary
# SQLite database, and is stopped at exit. A failed run keeps that directory (payd's log, the
# document, the generated clients) and says where.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

GENERATOR_VERSION="${CLIENT_SMOKE_GENERATOR_VERSION:-0.29.1}"
STANDARDWEBHOOKS_PY_VERSION=1.3.0
# The npm packages, exactly: the TypeScript client's generator and runtime, the type checker
# and runner, Node's types, and the Standard Webhooks library.
NPM_PINS=(
    openapi-typescript@7.13.0
    openapi-fetch@0.17.0
    typescript@5.9.3
    tsx@4.23.15
    @types/node@20.19.43
    standardwebhooks@1.3.0
)
NPM_DIR="$(realpath -m "${CARGO_TARGET_DIR:-target}")/client-smoke-npm"
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
    "PUT /account/shops/{profile_id}/webhook webhooks/put_endpoint"
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

step "tools: python3 with openapi-python-client $GENERATOR_VERSION and standardwebhooks $STANDARDWEBHOOKS_PY_VERSION (virtual environment in $WORK)"
command -v curl >/dev/null 2>&1 || apt_install curl
make_venv "$WORK/venv"
PY="$WORK/venv/bin/python"
timeout 600 "$PY" -m pip install -q --disable-pip-version-check --timeout 60 \
    "openapi-python-client==$GENERATOR_VERSION" "standardwebhooks==$STANDARDWEBHOOKS_PY_VERSION"
"$PY" --version
"$WORK/venv/bin/openapi-python-client" --version

step "tools: Node.js with ${NPM_PINS[*]} (in $NPM_DIR)"
# fetch, which openapi-fetch uses, is global from Node 18 on.
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null; then
    apt_install nodejs npm
fi
node --version
if [ "$(cat "$NPM_DIR/pins" 2>/dev/null)" != "${NPM_PINS[*]}" ] || [ ! -d "$NPM_DIR/node_modules/.bin" ]; then
    rm -rf "$NPM_DIR"
    mkdir -p "$NPM_DIR"
    timeout 600 npm install --prefix "$NPM_DIR" --no-audit --no-fund --save-exact -s "${NPM_PINS[@]}" >/dev/null
    printf '%s\n' "${NPM_PINS[*]}" >"$NPM_DIR/pins"
fi

step "start payd ($BIN)"
# A clean environment: only what this run sets, on a free port that payd announces in its log.
start_payd "$BIN" "$ADMIN_KEY"
wait_for_port || die "payd did not announce its port within 60 s"
BASE="http://127.0.0.1:$PORT"
wait_for_url "$BASE/health/live" || die "GET $BASE/health/live did not answer within 10 s"
echo "payd listens on $BASE"

step "the document: $BASE/openapi.json"
curl -fsS --max-time 20 -o "$WORK/openapi.json" "$BASE/openapi.json"

step "generate the Python client (openapi-python-client $GENERATOR_VERSION)"
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

step "install the generated Python client and its dependencies"
timeout 600 "$PY" -m pip install -q --disable-pip-version-check --timeout 60 "$WORK/payd-client"
"$PY" -m pip list --disable-pip-version-check 2>/dev/null | grep -iE '^(payd-client|httpx|attrs) '

step "smoke test through the generated Python client (.ci/client_smoke.py)"
timeout 120 "$PY" .ci/client_smoke.py "$BASE" "$ADMIN_KEY"

step "generate the TypeScript types (openapi-typescript) and type-check .ci/client_smoke.ts against them"
TS="$WORK/ts"
mkdir -p "$TS"
ln -s "$NPM_DIR/node_modules" "$TS/node_modules"
cp .ci/client_smoke.ts "$TS/"
printf '{"private": true, "type": "module"}\n' >"$TS/package.json"
# What docs/clients.md tells merchants to use. skipLibCheck stays off: the generated payd.d.ts is
# checked too, so a document that makes invalid types (two operations with one operationId, say)
# fails here as it would in a merchant's strict build.
cat >"$TS/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "es2022",
    "module": "preserve",
    "strict": true,
    "noEmit": true,
    "types": ["node"]
  },
  "files": ["client_smoke.ts"]
}
JSON
if ! (cd "$TS" && timeout 300 node_modules/.bin/openapi-typescript ../openapi.json -o payd.d.ts \
    >generator.log 2>&1); then
    cat "$TS/generator.log" >&2
    die "openapi-typescript could not generate types from /openapi.json"
fi
# openapi-typescript validates the document with Redocly's parser: show whatever it said.
grep -vE '^(✨|🚀)' "$TS/generator.log" || true
echo "payd.d.ts: $(wc -l <"$TS/payd.d.ts") lines"
if ! (cd "$TS" && timeout 300 node_modules/.bin/tsc -p . >tsc.log 2>&1); then
    cat "$TS/tsc.log" >&2
    if grep -q '^payd\.d\.ts(' "$TS/tsc.log"; then
        die "tsc: the types openapi-typescript made of /openapi.json are not valid TypeScript (the errors in payd.d.ts above; a 'Duplicate identifier' there is an operationId that two operations share)"
    fi
    die "tsc: .ci/client_smoke.ts and /openapi.json disagree about a request or an answer (the errors above)"
fi
echo "tsc --noEmit: no errors"

step "smoke test through the generated TypeScript client (.ci/client_smoke.ts, run by tsx)"
(cd "$TS" && timeout 120 node_modules/.bin/tsx client_smoke.ts "$BASE" "$ADMIN_KEY")
