#!/usr/bin/env bash
# Builds the Gitea server the forge tests run (test/gitops/adopt-pull-request.test.ts), pinned by
# test/gitops/gitea-tools/go.mod: Gitea's own go.mod has replace directives, so `go install …@version`
# refuses it and a wrapper module that copies them builds it instead. With cgo and Gitea's sqlite build
# tags (the tests keep its database in sqlite in a temporary directory). Output is cached in .cache/gitea-bin/<hash of the pins>/;
# a run with the binary present does nothing. Prints the binary's path on its last line of stdout (its
# directory also holds the templates and options it reads: STATIC_ROOT_PATH);
# progress and timing go to stderr.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/test/gitops/gitea-tools"

key="$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)"
bin="$root/.cache/gitea-bin/$key"
mkdir -p "$bin"

start=$(date +%s)
# One build at a time: the build takes minutes on 2 cores, and two at once would take twice that.
exec 9>"$bin/.lock"
flock 9

if [[ ! -x "$bin/gitea" ]]; then
  echo "gitea-tools: building gitea" >&2
  (cd "$tools" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=1 \
    nice -n 10 go build -trimpath -tags 'sqlite sqlite_unlock_notify' -ldflags='-s -w' -o "$bin/gitea.tmp" code.gitea.io/gitea)
  # without the bindata tag (which needs Gitea's frontend build) Gitea reads its templates and options
  # (locales, licences) from disk: STATIC_ROOT_PATH is this directory
  src="$(cd "$tools" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' code.gitea.io/gitea)"
  rm -rf "$bin/templates" "$bin/options"
  cp -R "$src/templates" "$src/options" "$bin/"
  chmod -R u+w "$bin/templates" "$bin/options"
  mv "$bin/gitea.tmp" "$bin/gitea"
  echo "gitea-tools: built gitea in $(($(date +%s) - start))s" >&2
else
  echo "gitea-tools: cached in $(($(date +%s) - start))s" >&2
fi
echo "$bin/gitea"
