#!/usr/bin/env bash
# Checks the operators' files in docs/ops against the code:
# - `promtool check rules` on the alerting rules, and their unit tests
#   (`promtool test rules docs/ops/alerts.test.yml`);
# - promtool's parse of every expression of the dashboard;
# - the Grafana dashboard against docs/ops/dashboard.schema.json, and every metric named in it,
#   in the rules or in their tests against the metrics payd records in src/ and actors/
#   (.ci/ops-check.py says how).
#
# Runs on a fresh clone on Debian and installs what it needs itself (sudo only when not root):
# promtool from Debian's prometheus package (its server is kept from starting) unless promtool
# is already there, and jsonschema and PyYAML, pinned, into a virtual environment in a
# temporary directory removed at exit. No cargo: it reads the sources, it does not build them.
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."

JSONSCHEMA_VERSION="${OPS_CHECK_JSONSCHEMA_VERSION:-4.23.0}"
PYYAML_VERSION="${OPS_CHECK_PYYAML_VERSION:-6.0.2}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-ops-check.XXXXXX")
POLICY_GUARD=""
cleanup() {
    [ -z "$POLICY_GUARD" ] || as_root rm -f "$POLICY_GUARD"
    rm -rf "$WORK"
}
trap cleanup EXIT

step "tools: promtool, python3 with jsonschema $JSONSCHEMA_VERSION and PyYAML $PYYAML_VERSION"
if ! command -v promtool >/dev/null 2>&1; then
    # promtool comes with the Prometheus server: a policy-rc.d that refuses keeps the package's
    # service from starting (only when the machine has none of its own).
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        POLICY_GUARD=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$POLICY_GUARD" >/dev/null
        as_root chmod 755 "$POLICY_GUARD"
    fi
    apt_install prometheus
    if [ -n "$POLICY_GUARD" ]; then
        as_root rm -f "$POLICY_GUARD"
        POLICY_GUARD=""
    fi
fi
promtool --version 2>&1 | head -n 1
make_venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check \
    "jsonschema==$JSONSCHEMA_VERSION" "PyYAML==$PYYAML_VERSION"
"$WORK/venv/bin/python" --version

step "promtool check rules docs/ops/alerts.yml"
promtool check rules docs/ops/alerts.yml

step "promtool test rules docs/ops/alerts.test.yml"
promtool test rules docs/ops/alerts.test.yml

step "dashboard schema, and the metric names of the dashboard and the rules against src/ and actors/"
"$WORK/venv/bin/python" .ci/ops-check.py --dashboard-rules-out "$WORK/dashboard-exprs.yml"

step "promtool parses every dashboard expression (as recording rules, Grafana's variables filled in)"
promtool check rules "$WORK/dashboard-exprs.yml"

step "ops check passed"
