#!/usr/bin/env bash
# The OCI image (docs/deployment.md, "The container image"): a Debian base made here with
# mmdebstrap (public registries cannot be pulled from on CI's machines), the Dockerfile built
# on it by buildah, and a payment through payd started inside it with the image's own user,
# environment and entrypoint, then its health check command.
#
# Usage: .ci/image.sh [path of the payd binary to put in the image, target/release/payd]
set -euo pipefail
# shellcheck source=SCRIPTDIR/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
BIN="${1:-target/release/payd}"
TARGET="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
PORT="${PAYD_IMAGE_PORT:-18081}"

missing=()
for tool in mmdebstrap buildah podman; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt_install "${missing[@]}"
fi

if ! podman image exists localhost/debian-base; then
    mkdir -p "$TARGET/image"
    [ -f "$TARGET/image/base.tar" ] || mmdebstrap --quiet --variant=minbase bookworm "$TARGET/image/base.tar"
    podman import "$TARGET/image/base.tar" localhost/debian-base
fi

buildah bud --quiet --isolation chroot --format docker \
    --build-arg BASE=localhost/debian-base --build-arg PAYD_BIN="$BIN" -t localhost/payd:ci .
buildah inspect --type image localhost/payd:ci |
    python3 -c 'import json,sys; c=json.load(sys.stdin)["Docker"]["config"]; print("user", c["User"], "entrypoint", c["Entrypoint"], "cmd", c["Cmd"], "healthcheck", c["Healthcheck"]["Test"]); assert c["User"]=="payd" and c["Healthcheck"]["Test"][-1]=="health"'

ctr=$(buildah from localhost/payd:ci)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    pkill -f "payd-image-ci-marker" 2>/dev/null || true
    buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# The image's production defaults, and what an operator must give it.
secrets=(
    --env PAYD_LISTEN="127.0.0.1:$PORT"
    --env PAYD_HTTP__PUBLIC_URL=https://pay.example.com
    --env PAYD_SECURITY__KEY_PEPPER="$(head -c 36 /dev/urandom | base64)"
    --env PAYD_SECURITY__MASTER_KEY="$(head -c 32 /dev/urandom | base64)"
    --env PAYD_ADMIN_KEY=image-admin-key-0123456789
    --env PAYD_CI_MARKER=payd-image-ci-marker
)
test "$(buildah run --isolation chroot "$ctr" -- id -un)" = payd
buildah run --isolation chroot "${secrets[@]}" "$ctr" -- /usr/local/bin/payd serve &
server=$!
base="http://127.0.0.1:$PORT"
wait_for_url "$base/health/ready"
buildah run --isolation chroot "${secrets[@]}" "$ctr" -- /usr/local/bin/payd health
echo "health check command: ready"
create_merchant "$base" image-admin-key-0123456789
read -r _ status < <(pay "$base" 990)
echo "payment through the image: $status"
test "$status" = succeeded
echo "image: built from a local Debian base, started, healthy, paid through"
