#!/usr/bin/env bash
# Builds the node binaries the cluster test runs (kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy) from the same pins as scripts/k8s-tools.sh (test/k8s/tools/go.mod), into the same cache
# directory. Kept apart from k8s-tools.sh so the other Kubernetes tests do not build them.
# Usage: tools.sh [binary...] (default: all).
# Prints the directory holding the binaries on its last line of stdout; progress and timing go to stderr.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
tools="$root/test/k8s/tools"
bin="$(bash "$root/scripts/k8s-tools.sh" | tail -n1)"
wanted=("$@")
((${#wanted[@]})) || wanted=(kubelet kube-controller-manager kube-scheduler kube-proxy)

exec 9>"$bin/.lock"
flock 9
for name in "${wanted[@]}"; do
  [[ -x "$bin/$name" ]] && continue
  start=$(date +%s)
  echo "cluster-tools: building $name" >&2
  (cd "$tools" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -ldflags='-s -w' -o "$bin/$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "cluster-tools: built $name in $(($(date +%s) - start))s" >&2
done
echo "$bin"
