#!/usr/bin/env bash
# Runs the quick starts of docs/quickstart.md exactly as written: curl, Python (the client
# openapi-python-client makes) and Node.js/TypeScript (openapi-typescript and openapi-fetch),
# each in an empty directory of its own against a fresh payd started as `cargo run --release`
# starts it (sandbox, a demo merchant on the first start), with PAYD_BASE_URL and PAYD_API_KEY
# set as the page tells the reader: payd's address and the key payd printed at start-up. Every
# ```sh block runs and every block with a file name is written, in the page's order, in one
# bash per section; each `# → …` line must be in what its block printed
# (.ci/quickstart_blocks.py says the rules). Also checks that the blocks README.md and
# docs/clients.md show from the page are blocks of it, character for character.
#
# Usage: .ci/quickstarts.sh [PAYD_BINARY]   (default: target/debug/payd, or under
# $CARGO_TARGET_DIR). Builds nothing. Installs what the page needs when it is missing (curl,
# jq, python3-venv, Node.js; sudo only when not root); what the page itself installs (pip and
# npm packages) goes into each section's directory, under a temporary directory that a failed
# run keeps and names. QUICKSTART_SECTION=NAME runs one section.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

BIN="${1:-${CARGO_TARGET_DIR:-target}/debug/payd}"
PAGE=docs/quickstart.md
# A quick start per language, by its heading on the page.
SECTIONS=("curl" "Python" "Node.js and TypeScript")
SECTION_TIMEOUT=600

die() {
    echo "quickstarts: $*" >&2
    exit 1
}

[ -x "$BIN" ] || die "no payd binary at $BIN (build it first: cargo build --bin payd)"
BIN=$(realpath "$BIN")

ROOT=$(mktemp -d "${TMPDIR:-/tmp}/payd-quickstarts.XXXXXX")
WORK=""
SERVER_PID=""

cleanup() {
    local rc=$?
    stop_server
    if [ "$rc" -ne 0 ]; then
        if [ -n "$WORK" ] && [ -s "$WORK/server.log" ]; then
            echo "--- payd's errors and warnings ---" >&2
            show_server_problems
        fi
        echo "quickstarts: failed; each section's directory, its script and payd's log stay in $ROOT" >&2
    else
        rm -rf "$ROOT"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "the page: $PAGE"
mapfile -t found < <(python3 .ci/quickstart_blocks.py sections "$PAGE")
for name in "${SECTIONS[@]}"; do
    printf '%s\n' "${found[@]}" | grep -qxF "$name" || die "$PAGE has no section '## $name' with blocks to run"
done
printf 'sections with blocks to run: %s\n' "$(printf '"%s" ' "${found[@]}")"
python3 .ci/quickstart_blocks.py copies README.md "$PAGE"
python3 .ci/quickstart_blocks.py copies docs/clients.md "$PAGE"

step "tools the page assumes: curl, jq, python3 with venv, Node.js 18 or later with npm"
command -v curl >/dev/null 2>&1 || apt_install curl
command -v jq >/dev/null 2>&1 || apt_install jq
make_venv "$ROOT/venv-probe" && rm -rf "$ROOT/venv-probe"
if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null; then
    apt_install nodejs npm
fi
printf '%s, %s, %s, node %s, npm %s\n' "$(curl --version | head -n 1 | cut -d' ' -f1-2)" \
    "$(jq --version)" "$(python3 --version)" "$(node --version)" "$(npm --version)"

ran=()
for name in "${found[@]}"; do
    [ -z "${QUICKSTART_SECTION:-}" ] || [ "$name" = "$QUICKSTART_SECTION" ] || continue
    slug=$(printf '%s' "$name" | tr -c '[:alnum:]' '-' | tr '[:upper:]' '[:lower:]')
    step "quick start: $name ($PAGE, in $ROOT/$slug)"
    # payd as `cargo run --release` starts it: sandbox, a demo merchant on the first start, no
    # admin key; only its port, database and data directory are this run's own.
    WORK="$ROOT/payd-$slug"
    mkdir -p "$WORK" "$ROOT/$slug"
    start_payd "$BIN" "" PAYD_SANDBOX__DEMO_MERCHANT=true
    wait_for_port || die "payd did not announce its port within 60 s"
    wait_for_url "http://127.0.0.1:$PORT/health/live" || die "payd did not answer /health/live within 10 s"
    # The line the page tells the reader to take the key from.
    key=""
    for _ in $(seq 1 100); do # 10 s
        key=$(sed -n 's/^ *export KEY=\(snd_[A-Za-z0-9_]*\)$/\1/p' "$WORK/server.out" | head -n 1)
        [ -n "$key" ] && break
        sleep 0.1
    done
    [ -n "$key" ] || die "payd printed no 'export KEY=snd_…' line at start-up: $(cat "$WORK/server.out")"
    start=$SECONDS
    PAYD_BASE_URL="http://127.0.0.1:$PORT" PAYD_API_KEY="$key" \
        python3 .ci/quickstart_blocks.py run "$PAGE" "$name" "$ROOT/$slug" "$SECTION_TIMEOUT"
    echo "($((SECONDS - start)) s)"
    stop_server
    ran+=("$name")
done

[ "${#ran[@]}" -gt 0 ] || die "no section named '${QUICKSTART_SECTION:-}' on $PAGE"
step "quick starts passed: $(printf '"%s" ' "${ran[@]}")"
