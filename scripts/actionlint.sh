#!/usr/bin/env bash
# Builds actionlint (pinned below) into .cache/actionlint/<version>/ with `go install`, as
# scripts/k8s-tools.sh builds the Kubernetes binaries, then checks every workflow of the release
# pipeline (.github/workflows/, .forgejo/workflows/; docs/release.md#the-release-pipeline) and the
# scripts/release/ steps they run.
# `npm run lint` runs it.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/lib/go-install.sh
source "$root/scripts/lib/go-install.sh"
version="v1.7.12"
bin="$root/.cache/actionlint/$version"
mkdir -p "$bin"

# One build at a time: parallel test workers may all ask for it.
exec 9>"$bin/.lock"
flock 9
if [[ ! -x "$bin/actionlint" ]]; then
  echo "actionlint: building $version" >&2
  go_install_to "$bin" actionlint "github.com/rhysd/actionlint/cmd/actionlint@$version"
fi
exec 9>&-

cd "$root"
# actionlint reads .github/workflows/ by itself; Forgejo Actions runs the same workflow syntax, so its
# files are named explicitly. shellcheck is used where installed (actionlint skips it otherwise).
"$bin/actionlint" -no-color .github/workflows/*.yml .forgejo/workflows/*.yml
# the scripts those workflows run, with the same shellcheck (test-prereqs.sh installs it)
if command -v shellcheck >/dev/null; then
  shellcheck -x scripts/release/*.sh scripts/actionlint.sh scripts/k8s-tools.sh scripts/lib/*.sh
else
  echo "actionlint: shellcheck is not installed (scripts/test-prereqs.sh installs it): shell not checked" >&2
fi
