#!/usr/bin/env bash
# Builds peerops-wireguard (wireguard-host/: every userspace WireGuard tunnel in one process, docs/agent.md)
# into .cache/wireguard-host/<hash of its sources>/; a run that finds it built does nothing.
# Prints the directory holding the binary on its last line of stdout; progress and timing go to stderr.
# From a cold clone the Go modules (pinned by go.sum) are downloaded first, bounded in time.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/wireguard-host"
# the program's sources only: a change to its tests (*_test.go) builds nothing new
sources=()
for f in "$src"/*.go; do [[ $f == *_test.go ]] || sources+=("$f"); done
key="$(cat "$src/go.mod" "$src/go.sum" "${sources[@]}" | sha256sum | cut -c1-16)"
bin="$root/.cache/wireguard-host/$key"
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "build-wireguard-host: go not found on PATH: install Go 1.24 or later (golang-go)" >&2
  exit 1
fi
start=$(date +%s)
# one build at a time (test-prereqs and a test may ask at once)
exec 9>"$bin/.lock"
flock 9
if [[ -x "$bin/peerops-wireguard" ]]; then
  echo "build-wireguard-host: cached in $(($(date +%s) - start))s" >&2
else
  cd "$src"
  echo "build-wireguard-host: downloading modules" >&2
  timeout 300 env GOFLAGS=-mod=readonly go mod download
  echo "build-wireguard-host: building" >&2
  GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 timeout 600 \
    go build -trimpath -ldflags='-s -w' -o "$bin/peerops-wireguard.tmp" .
  mv "$bin/peerops-wireguard.tmp" "$bin/peerops-wireguard"
  echo "build-wireguard-host: built in $(($(date +%s) - start))s" >&2
fi
echo "$bin"
