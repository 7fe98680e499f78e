#!/usr/bin/env bash
# Build the tierra image from deploy/Dockerfile with buildah and print its name on stdout
# (the only line written to stdout).
#
# The base: $TIERRA_IMAGE_BASE when given; else the official python slim image when a
# registry answers; else (this project's machines: no container registry) a base built
# from Debian's packages with mmdebstrap, cached as a rootfs tarball and as the image
# localhost/tierra-base:<hash> so only the first build pays for it.
#
# Nothing is rebuilt when the image already carries the hash of what goes into it (the
# Dockerfile, .dockerignore, pyproject.toml, README.md, src/ and the base image's id):
# the label dev.tierra.source-hash. TIERRA_IMAGE_FORCE=1 rebuilds anyway.
#
# Environment:
#   TIERRA_IMAGE          name to tag (default localhost/tierra:<version>; the manifests'
#                         and the chart's image is tierra:<version>)
#   TIERRA_IMAGE_BASE     base image to build FROM (skips the registry probe)
#   TIERRA_IMAGE_CACHE    where the Debian rootfs is kept (default ~/.cache/tierra/image)
#   TIERRA_DEBIAN_MIRROR  Debian mirror (default http://deb.debian.org/debian)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { printf 'image: %s\n' "$*" >&2; }
die() { printf 'image: error: %s\n' "$*" >&2; exit 1; }

command -v buildah >/dev/null 2>&1 || die "buildah is not installed (make image installs it: apt-get install buildah mmdebstrap)"

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/src/tierra/__init__.py")"
[[ -n "$version" ]] || die "cannot read __version__ from src/tierra/__init__.py"
image="${TIERRA_IMAGE:-localhost/tierra:$version}"
official="docker.io/library/python:3.11-slim"
suite=bookworm
mirror="${TIERRA_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
cache="${TIERRA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tierra/image}"
start=$SECONDS

# The Debian base: python3 (3.11 on bookworm, as in the official image), its venv module
# and CA certificates; documentation, manuals and translations left out.
debian_args=(
    --variant=minbase --mode=root
    --include=python3,python3-venv,ca-certificates
    --aptopt='APT::Install-Recommends "false"'
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    "$suite"
)
debian_sources=(
    "deb $mirror $suite main"
    "deb $mirror $suite-updates main"
    "deb ${mirror%/debian}/debian-security $suite-security main"
)

debian_base() { # prints the name of the Debian base image, building it when missing
    local key tar name ctr
    key="$(printf '%s\n' "${debian_args[@]}" "${debian_sources[@]}" | sha256sum | cut -c1-12)"
    name="localhost/tierra-base:$suite-$key"
    if buildah inspect --type image "$name" >/dev/null 2>&1; then
        log "base $name is cached"
        printf '%s\n' "$name"
        return
    fi
    tar="$cache/debian-$suite-$key.tar"
    if [[ ! -s "$tar" ]]; then
        command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is not installed (apt-get install mmdebstrap)"
        mkdir -p "$cache"
        log "building the Debian $suite base with mmdebstrap (cold: ~2-3 min)"
        mmdebstrap --format=tar "${debian_args[@]}" "$tar.tmp" "${debian_sources[@]}" >&2 \
            || die "mmdebstrap failed (see above)"
        mv -f "$tar.tmp" "$tar"
    fi
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$tar" / >&2
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 "$ctr"
    buildah commit --quiet --rm "$ctr" "$name" >/dev/null
    log "base $name committed from $tar"
    printf '%s\n' "$name"
}

pick_base() {
    if [[ -n "${TIERRA_IMAGE_BASE:-}" ]]; then
        printf '%s\n' "$TIERRA_IMAGE_BASE"
    elif buildah inspect --type image "$official" >/dev/null 2>&1 \
        || timeout 30 buildah pull --quiet "$official" >/dev/null 2>&1; then
        printf '%s\n' "$official"
    else
        log "no registry answers for $official: the base comes from Debian's packages"
        debian_base
    fi
}

base="$(pick_base)"
base_id="$(buildah inspect --type image --format '{{.FromImageID}}' "$base")"

source_hash() {
    (
        cd "$repo"
        printf 'base=%s\n' "$base_id"
        find deploy/Dockerfile .dockerignore pyproject.toml README.md src -type f \
            ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z \
            | xargs -0 sha256sum
    ) | sha256sum | cut -c1-16
}
hash="$(source_hash)"

current="$(buildah inspect --type image --format '{{index .ImageAnnotations "dev.tierra.source-hash"}}' "$image" 2>/dev/null || true)"
if [[ "${TIERRA_IMAGE_FORCE:-0}" != 1 && "$current" == "$hash" ]]; then
    log "$image is current (source hash $hash)"
    printf '%s\n' "$image"
    exit 0
fi

secret=()
# A proxy re-signing TLS (as on this project's machines) needs the host's CA bundle for
# pip inside the build; it is mounted as a build secret, never stored in the image.
[[ -s /etc/ssl/certs/ca-certificates.crt ]] && secret=(--secret id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt)

log "building $image from $base (source hash $hash)"
buildah bud --quiet --isolation chroot --layers "${secret[@]}" \
    --build-arg "BASE=$base" \
    --annotation "dev.tierra.source-hash=$hash" \
    --label "org.opencontainers.image.version=$version" \
    -f "$repo/deploy/Dockerfile" -t "$image" "$repo" >&2 \
    || die "buildah bud failed (see above)"
log "built in $((SECONDS - start)) s; size: $(buildah images --format '{{.Size}}' "$image" | head -1)"
printf '%s\n' "$image"
