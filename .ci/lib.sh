# shellcheck shell=bash
# Helpers shared by the scripts in .ci/: each sources it with `. "$(dirname "$0")/lib.sh"`.
# Functions only: sourcing it sets no option or variable, changes no directory, runs nothing.
#
# The payd helpers work with two variables of the calling script: WORK, its temporary
# directory (payd's database and data, server.out and server.log go there), and SERVER_PID,
# which start_payd sets and stop_server clears (the script sets it to "" before its traps).

step() { printf '\n==> %s\n' "$*"; }

# as_root COMMAND...: COMMAND as root, through sudo only when not root already.
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# apt_install PACKAGE...: installs Debian packages quietly, with `apt-get update` the first time.
apt_install() {
    if [ -z "${LIB_APT_UPDATED:-}" ]; then
        as_root apt-get update -qq
        LIB_APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# make_venv DIR: a Python virtual environment in DIR, installing python3 and python3-venv if
# they are missing.
make_venv() {
    command -v python3 >/dev/null 2>&1 || apt_install python3
    if ! python3 -m venv "$1" >/dev/null 2>&1; then
        # Debian's python3 has no ensurepip without python3-venv.
        rm -rf "$1"
        apt_install python3-venv
        python3 -m venv "$1"
    fi
}

# start_payd BINARY ADMIN_KEY [NAME=VALUE...]: `BINARY serve` in the background, in a clean
# environment (PATH, HOME, and only the PAYD_* set here or given as arguments): a free loopback
# port (127.0.0.1:0, which payd announces in its log), a SQLite database and the sandbox's data
# in $WORK, no demo merchant, JSON logs. Its stdout goes to $WORK/server.out, its log to
# $WORK/server.log. Sets SERVER_PID.
start_payd() {
    local bin=$1 admin_key=$2
    shift 2
    env -i PATH="$PATH" HOME="${HOME:-/tmp}" \
        PAYD_LISTEN=127.0.0.1:0 \
        PAYD_DATABASE_URL="sqlite://$WORK/payd.db?mode=rwc" \
        PAYD_ADMIN_KEY="$admin_key" \
        PAYD_SANDBOX__DEMO_MERCHANT=false \
        PAYD_SANDBOX__DATA_DIR="$WORK/data" \
        PAYD_LOG__FORMAT=json \
        "$@" \
        "$bin" serve >"$WORK/server.out" 2>"$WORK/server.log" &
    SERVER_PID=$!
}

# wait_for_port: sets PORT to the port payd announces in $WORK/server.log, waiting up to 60 s.
# Exits 1, showing payd's log, when payd ends first; returns 1 when no port is announced in time.
wait_for_port() {
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
    [ -n "$PORT" ]
}

# wait_for_url URL: waits up to 10 s for a 2xx from URL; then fails as curl does, with its error.
wait_for_url() {
    for _ in $(seq 1 100); do # 10 s
        curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null && break
        sleep 0.1
    done
    curl -fsS -o /dev/null --max-time 2 "$1"
}

# stop_server: stops payd ($SERVER_PID, if any) and reaps it.
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

# show_server_problems: the last 40 errors and warnings of $WORK/server.log, on stderr.
show_server_problems() {
    grep -E '"level":"(ERROR|WARN)"' "$WORK/server.log" | tail -n 40 >&2 || true
}

# What the package, image and upgrade checks do to a running payd through its HTTP API.

# A field of the JSON object on standard input.
json_field() {
    python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"
}

# A merchant made through the operator API of the payd at $1 with the admin key $2: sets KEY
# and SHOP.
create_merchant() {
    local merchant
    merchant=$(curl -fsS -X POST "$1/admin/merchants" -H "api-key: $2" \
        -H 'content-type: application/json' -d '{"name":"CI","mode":"sandbox"}')
    KEY=$(printf '%s' "$merchant" | json_field secret_key)
    SHOP=$(printf '%s' "$merchant" | json_field profile_id)
}

# A sandbox card payment of $2 EUR cents through the payd at $1 as KEY and SHOP; prints
# "<payment id> <status>".
pay() {
    curl -sS --fail-with-body -X POST "$1/payments" -H "api-key: $KEY" -H "x-profile-id: $SHOP" \
        -H 'content-type: application/json' \
        -d "{\"amount\": $2, \"currency\": \"EUR\", \"confirm\": true, \"payment_method_data\": {\"card\": {\"number\": \"4242424242424242\", \"exp_month\": 12, \"exp_year\": 2035, \"cvc\": \"123\"}}}" |
        python3 -c 'import json,sys; p=json.load(sys.stdin); print(p["payment_id"], p["status"])'
}
