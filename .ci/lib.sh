# Sourced by .ci/package.sh, .ci/image.sh and .ci/upgrade.sh: what each does to a running payd
# through its HTTP API.

# A field of the JSON object on standard input.
json_field() {
    python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"
}

# Waits until the payd at $1 is ready; with $2, gives up as soon as process $2 has exited.
wait_ready() {
    for _ in $(seq 1 150); do
        curl -fsS "$1/health/ready" >/dev/null 2>&1 && return 0
        if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
            return 1
        fi
        sleep 0.2
    done
    return 1
}

# A merchant made through the operator API of the payd at $1 with the admin key $2: sets KEY
# and SHOP.
create_merchant() {
    local merchant
    merchant=$(curl -fsS -X POST "$1/admin/merchants" -H "api-key: $2" \
        -H 'content-type: application/json' -d '{"name":"CI"}')
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
