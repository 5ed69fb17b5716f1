#!/usr/bin/env bash
# Lint of the Go program (wireguard-host/, peerops-wireguard): gofmt's format and go vet, as
# `npm run lint` does eslint for the TypeScript.
set -euo pipefail
cd "$(dirname "$0")/../wireguard-host"
unformatted=$(gofmt -l .)
if [[ -n "$unformatted" ]]; then
  echo "lint-go: not in gofmt's format (run gofmt -w wireguard-host):" >&2
  echo "$unformatted" >&2
  exit 1
fi
GOFLAGS="-mod=readonly -buildvcs=false" go vet ./...
