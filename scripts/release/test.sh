#!/usr/bin/env bash
# Release step 3: the checks a tag must pass before anything is built: types, lint of the workflows and
# a test subset (PEEROPS_RELEASE_TESTS, space-separated vitest paths; default below: the release's own
# tests and the CLI's). The whole suite runs on every push (.ci/run); this is what a tag re-checks
# in the release job's time.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$root" || exit

if [[ "$version" != "$package_version" ]]; then
  echo "test: the tag says $version but package.json says $package_version: tag the commit that sets the version (docs/release.md)" >&2
  exit 1
fi
tests="${PEEROPS_RELEASE_TESTS:-test/release test/cli test/docs}"
npx tsc -p tsconfig.json --noEmit
bash scripts/actionlint.sh
# shellcheck disable=SC2086 # the list is split on purpose
npx vitest run $tests
