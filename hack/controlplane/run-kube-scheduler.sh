#!/usr/bin/env bash
# Run the kube-scheduler built by build.sh against a running control plane, so tierra's
# scheduler and kube-scheduler can bind the same pods and be compared.
#
# Usage: run-kube-scheduler.sh --kubeconfig FILE [--qps N] [--burst N] [--port N]
#                              [--config-dir DIR] [-- extra kube-scheduler flags]
#
#   --kubeconfig  credentials of the scheduler's own identity (the control plane writes
#                 system-kube-scheduler.kubeconfig next to admin.kubeconfig)
#   --qps/--burst client-side rate limit toward the API server (default 5000/5000, as
#                 kube-scheduler's own scheduler_perf runs; the built-in 50/100 would make
#                 any benchmark measure the rate limiter)
#   --port        serve healthz/metrics on 127.0.0.1:N (default 0: not served, which also
#                 avoids the delegated-authentication lookups a bare control plane cannot answer)
#   --config-dir  where to write the KubeSchedulerConfiguration; the script then execs
#                 kube-scheduler, so signals (and a parent-death signal set by the caller)
#                 reach it directly. Default: a temporary folder, removed on exit.
#
# Leader election is off: exactly one scheduler runs against a throwaway control plane.
# The binary is found like the Python fixture finds it: TEST_ASSET_KUBE_SCHEDULER, then
# $KUBEBUILDER_ASSETS/kube-scheduler, then the build cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { printf 'run-kube-scheduler: error: %s\n' "$*" >&2; exit 2; }

kubeconfig="" qps=5000 burst=5000 port=0 config_dir=""
while (($#)); do
    case "$1" in
        --kubeconfig) kubeconfig="${2:?}"; shift 2 ;;
        --qps) qps="${2:?}"; shift 2 ;;
        --burst) burst="${2:?}"; shift 2 ;;
        --port) port="${2:?}"; shift 2 ;;
        --config-dir) config_dir="${2:?}"; shift 2 ;;
        --) shift; break ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ -n "$kubeconfig" ]] || die "--kubeconfig is required"
[[ -r "$kubeconfig" ]] || die "cannot read kubeconfig $kubeconfig"

binary=""
for candidate in "${TEST_ASSET_KUBE_SCHEDULER:-}" \
    "${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/kube-scheduler}" \
    "$(bash "$here/build.sh" --print-cache-dir)/kube-scheduler"; do
    if [[ -n "$candidate" && -x "$candidate" ]]; then
        binary="$candidate"
        break
    fi
done
[[ -n "$binary" ]] || die "kube-scheduler not found; build it with: bash $here/build.sh"

own_config_dir=0
if [[ -z "$config_dir" ]]; then
    config_dir="$(mktemp -d "${TMPDIR:-/tmp}/kube-scheduler.XXXXXX")"
    own_config_dir=1
    trap 'rm -rf "$config_dir"' EXIT
fi
mkdir -p "$config_dir"
config="$config_dir/kube-scheduler-config.yaml"
cat >"$config" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: "$kubeconfig"
  qps: $qps
  burst: $burst
leaderElection:
  leaderElect: false
profiles:
  - schedulerName: default-scheduler
EOF

args=(--config="$config" --secure-port="$port" --bind-address=127.0.0.1 "$@")
if ((!own_config_dir)); then
    exec "$binary" "${args[@]}"
fi
# Run as a child (not exec) so the trap above removes the temporary folder; forward the
# signals that stop it.
"$binary" "${args[@]}" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null || true' INT TERM
status=0
wait "$child" || status=$?
# A trapped signal interrupts the first wait; wait again for the real exit status.
if kill -0 "$child" 2>/dev/null; then
    wait "$child" || status=$?
fi
exit "$status"
