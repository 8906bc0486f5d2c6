#!/usr/bin/env bash
# Build tritium's container image; `make image` runs this. It picks the path this machine
# allows and prints what it did:
#   registry  FROM a registry's debian:bookworm-slim (needs the registry reachable);
#   offline   a bookworm root file system made with mmdebstrap from this machine's own apt
#             mirror, imported into podman, and built on with --isolation=chroot.
# Either way the build context holds only wheels built here through this machine's pip
# configuration (tritium's own wheel from the checkout and its dependencies), so the build
# itself needs no index.
#
# Environment: IMAGE (tag, default localhost/tritium:latest), BUILD_PATH (auto, registry or
# offline), PYTHON (the Python whose pip builds the wheels), REGISTRY_BASE.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE="$ROOT/deploy/container"
WORK="$ROOT/build/image"
IMAGE=${IMAGE:-localhost/tritium:latest}
BUILD_PATH=${BUILD_PATH:-auto}
PYTHON=${PYTHON:-python3}
REGISTRY_BASE=${REGISTRY_BASE:-docker.io/library/debian:bookworm-slim}
OFFLINE_BASE=localhost/tritium-base:bookworm
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/containers.conf}

say() { echo "image: $*"; }

if ! command -v podman >/dev/null 2>&1; then
    "$HERE/ensure-tools.sh" podman runc || { say "SKIPPED: podman is not available"; exit 2; }
fi
"$HERE/ensure-tools.sh" runc >/dev/null || true
say "engine: $(podman --version) (CONTAINERS_CONF=$CONTAINERS_CONF)"

# 1. Wheels: tritium from this checkout and everything it needs, through the host's pip index.
rm -rf "$WORK/context"
mkdir -p "$WORK/context/wheels"
say "building wheels with $("$PYTHON" -m pip --version | cut -d' ' -f1-2) into build/image/context/wheels"
if ! "$PYTHON" -m pip wheel --quiet --wheel-dir "$WORK/context/wheels" "$ROOT[opentelemetry]" \
        >"$WORK/pip-wheel.log" 2>&1; then
    cat "$WORK/pip-wheel.log"; say "FAILED: pip wheel"; exit 1
fi
say "$(ls "$WORK/context/wheels" | wc -l) wheels, $(du -sh "$WORK/context/wheels" | cut -f1)"

# 2. Base image.
base=""
if [ "$BUILD_PATH" = auto ] || [ "$BUILD_PATH" = registry ]; then
    if podman image exists "$REGISTRY_BASE" || timeout 60 podman pull -q "$REGISTRY_BASE" >/dev/null 2>&1; then
        base=$REGISTRY_BASE
        say "path: registry (base $REGISTRY_BASE)"
    elif [ "$BUILD_PATH" = registry ]; then
        say "FAILED: cannot pull $REGISTRY_BASE"; exit 1
    else
        say "registry base $REGISTRY_BASE cannot be pulled here; taking the offline path"
    fi
fi
if [ -z "$base" ]; then
    base=$OFFLINE_BASE
    if podman image exists "$OFFLINE_BASE" && [ -z "${REBUILD_BASE:-}" ]; then
        say "path: offline (reusing $OFFLINE_BASE; REBUILD_BASE=1 makes it again)"
    else
        "$HERE/ensure-tools.sh" mmdebstrap || { say "SKIPPED: mmdebstrap is not available"; exit 2; }
        mapfile -t sources < <(python3 "$HERE/apt_sources.py")
        say "path: offline: mmdebstrap bookworm from ${sources[*]}"
        mmdebstrap --quiet --variant=minbase \
            --include=python3,python3-venv,tini,ca-certificates \
            --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            --dpkgopt='path-exclude=/usr/share/info/*' \
            --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
            bookworm "$WORK/rootfs.tar" "${sources[@]}"
        podman import --quiet "$WORK/rootfs.tar" "$OFFLINE_BASE" >/dev/null
        rm -f "$WORK/rootfs.tar"
    fi
fi

# 3. The image.
say "podman build --isolation=chroot -t $IMAGE (base $base)"
start=$(date +%s)
podman build --quiet --isolation=chroot --layers=false \
    --build-arg "BASE_IMAGE=$base" \
    -f "$HERE/Containerfile" -t "$IMAGE" "$WORK/context" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
say "built $IMAGE in $(( $(date +%s) - start )) s: $(( size / 1000000 )) MB"
if [ "$size" -gt 400000000 ]; then
    say "WARNING: above the 400 MB target"
fi
