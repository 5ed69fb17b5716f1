#!/usr/bin/env bash
# Builds the binaries the Kubernetes tests run: kube-apiserver, etcd and kubectl (pinned by
# test/k8s/tools/go.mod) and helm. Output is cached in .cache/k8s-bin/<hash of the pins>/; a run with all four present does nothing.
# Prints the directory holding the binaries on its last line of stdout; progress and timing go to stderr.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/go-install.sh
source "$root/scripts/lib/go-install.sh"
tools="$root/test/k8s/tools"
helm_version="v3.21.4"

key="$(sha256sum <"$tools/go.mod" | cut -c1-16)-helm-$helm_version"
bin="$root/.cache/k8s-bin/$key"
mkdir -p "$bin"

start=$(date +%s)
built=()
# One build at a time: two concurrent compiles of kube-apiserver would exceed what 2 cores do in time.
exec 9>"$bin/.lock"
flock 9

build_in_tools() { # name package
  if [[ ! -x "$bin/$1" ]]; then
    echo "k8s-tools: building $1 ($2)" >&2
    (cd "$tools" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
      go build -trimpath -ldflags='-s -w' -o "$bin/$1.tmp" "$2")
    mv "$bin/$1.tmp" "$bin/$1"
    built+=("$1")
  fi
}

build_in_tools etcd go.etcd.io/etcd/server/v3
build_in_tools kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build_in_tools kubectl k8s.io/kubernetes/cmd/kubectl

if [[ ! -x "$bin/helm" ]]; then
  echo "k8s-tools: building helm $helm_version" >&2
  # helm keeps its own go.mod (its Kubernetes libraries differ from the API server's), so it is built with go install @version.
  go_install_to "$bin" helm "helm.sh/helm/v3/cmd/helm@$helm_version"
  built+=("helm")
fi

elapsed=$(($(date +%s) - start))
if ((${#built[@]})); then
  echo "k8s-tools: built ${built[*]} in ${elapsed}s" >&2
else
  echo "k8s-tools: cached in ${elapsed}s" >&2
fi
echo "$bin"
