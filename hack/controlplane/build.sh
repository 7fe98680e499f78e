#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-scheduler, kubectl,
# kube-controller-manager) and helm from the Go module proxy into a cache folder keyed by the pinned versions,
# and print that folder on stdout (the only line written to stdout).
#
# Why a build at all: no registry reachable here ships a kube-apiserver, and
# `go install k8s.io/kubernetes/cmd/...@v1.36.Y` is refused (k/k's go.mod has
# replace directives). The wrapper modules in kube/, etcd/ and helm/ pin everything;
# hack/controlplane/README.md ("Why not go install ...") gives the details.
#
# Environment:
#   KUBEBUILDER_ASSETS         use binaries already there (envtest convention);
#                              nothing is built, they are only checked.
#   TIERRA_CONTROLPLANE_CACHE  parent of the versioned cache folder
#                              (default ${XDG_CACHE_HOME:-$HOME/.cache}/tierra/controlplane)
#   TIERRA_BUILD_JOBS          go build -p value (default: 2, sized for 2 cores)
#   TIERRA_CONTROLPLANE_FORCE=1  rebuild even when the cache matches.
#
# `build.sh --print-cache-dir` only prints the cache folder (built or not).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf 'controlplane: %s\n' "$*" >&2; }
die() { printf 'controlplane: error: %s\n' "$*" >&2; exit 1; }

# Versions come from the committed go.mod files, so the cache key can never
# drift from what is actually built.
module_version() { # <go.mod> <module path>
    awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$1"
}
k8s_version="$(module_version "$here/kube/go.mod" k8s.io/kubernetes)"
etcd_version="$(module_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)"
helm_version="$(module_version "$here/helm/go.mod" helm.sh/helm/v4)"
[[ -n "$k8s_version" && -n "$etcd_version" && -n "$helm_version" ]] \
    || die "cannot read pinned versions from $here/{kube,etcd,helm}/go.mod"

required=(etcd kube-apiserver)
optional=(kube-scheduler kubectl kube-controller-manager helm)

check_folder() { # <dir>: 0 when every required binary is executable there
    local dir="$1" name missing=0
    for name in "${required[@]}"; do
        if [[ ! -x "$dir/$name" ]]; then
            log "missing $dir/$name"
            missing=1
        fi
    done
    return "$missing"
}

cache_root="${TIERRA_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tierra/controlplane}"
out="$cache_root/${k8s_version}-${etcd_version}"
if [[ "${1:-}" == --print-cache-dir ]]; then
    printf '%s\n' "$out"
    exit 0
fi
jobs="${TIERRA_BUILD_JOBS:-2}"

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
    check_folder "$KUBEBUILDER_ASSETS" \
        || die "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks required binaries (${required[*]}); unset it to build them"
    for name in "${optional[@]}"; do
        [[ -x "$KUBEBUILDER_ASSETS/$name" ]] \
            || log "note: $KUBEBUILDER_ASSETS/$name is absent; tests that need it will look in the build cache or skip"
    done
    log "using KUBEBUILDER_ASSETS, nothing built"
    printf '%s\n' "$KUBEBUILDER_ASSETS"
    exit 0
fi

# The stamp also covers go.sum and this script, so a changed dependency or
# changed flags rebuild even when the headline versions stay the same.
stamp_content() {
    printf 'k8s=%s etcd=%s helm=%s\n' "$k8s_version" "$etcd_version" "$helm_version"
    cat "$here/kube/go.mod" "$here/kube/go.sum" "$here/etcd/go.mod" "$here/etcd/go.sum" \
        "$here/helm/go.mod" "$here/helm/go.sum" "$here/build.sh" \
        | sha256sum | cut -d' ' -f1
}
expected_stamp="$(stamp_content)"

cache_is_current() {
    [[ -f "$out/.stamp" && "$(cat "$out/.stamp")" == "$expected_stamp" ]] || return 1
    local name
    for name in "${required[@]}" "${optional[@]}"; do
        [[ -x "$out/$name" ]] || return 1
    done
}

if [[ "${TIERRA_CONTROLPLANE_FORCE:-0}" != 1 ]] && cache_is_current; then
    log "cache is current ($k8s_version, etcd $etcd_version)"
    printf '%s\n' "$out"
    exit 0
fi

command -v go >/dev/null 2>&1 \
    || die "Go is not installed; install Go >= 1.26 or point KUBEBUILDER_ASSETS at existing etcd/kube-apiserver binaries"

mkdir -p "$cache_root"
# Two concurrent `make test` runs must not build over each other.
exec 9>"$cache_root/.build.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
    if [[ "${TIERRA_CONTROLPLANE_FORCE:-0}" != 1 ]] && cache_is_current; then
        log "cache was built by a concurrent run"
        printf '%s\n' "$out"
        exit 0
    fi
fi

staging="$(mktemp -d "$cache_root/.build.XXXXXX")"
trap 'rm -rf "$staging"' EXIT

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-} -mod=readonly"

# The module proxy's .info records the tag time: a deterministic build date
# keeps the binaries reproducible.
release_time="$(cd "$here/kube" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes 2>/dev/null || true)"
minor="${k8s_version#v1.}"
minor="${minor%%.*}"
version_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    version_flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    # The proxy does not record the tag's commit; an empty gitCommit beats the "$Format:%H$"
    # placeholder that would otherwise show up in /version.
    version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit="
    [[ -n "$release_time" ]] && version_flags+=" -X $pkg.buildDate=$release_time"
done

start=$SECONDS
log "building etcd $etcd_version into $out (go build -p $jobs)"
(cd "$here/etcd" && go build -p "$jobs" -trimpath -ldflags "-s -w" -o "$staging/etcd" go.etcd.io/etcd/server/v3) \
    || die "etcd build failed (see above); if a module was refused by the proxy, the message names it"

log "building kube-apiserver, kube-scheduler, kubectl, kube-controller-manager $k8s_version (cold: ~6-7 min and ~2 GB RAM on 2 cores; warm: seconds)"
(cd "$here/kube" && go build -p "$jobs" -trimpath -ldflags "-s -w$version_flags" -o "$staging/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl \
    k8s.io/kubernetes/cmd/kube-controller-manager) \
    || die "Kubernetes build failed (see above)"

log "building helm $helm_version"
(cd "$here/helm" && go build -p "$jobs" -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    -o "$staging/helm" helm.sh/helm/v4/cmd/helm) \
    || die "helm build failed (see above)"

mkdir -p "$out"
for name in "${required[@]}" "${optional[@]}"; do
    mv -f "$staging/$name" "$out/$name"
done
printf '%s\n' "$expected_stamp" >"$out/.stamp"
log "built in $((SECONDS - start)) s"
"$out/kube-apiserver" --version >&2 || true
"$out/etcd" --version | head -1 >&2 || true
printf '%s\n' "$out"
