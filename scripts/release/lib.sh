# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
# Sourced by every step of the release pipeline (docs/release.md#the-release-pipeline): the version
# and the directories each step reads and writes, so that the workflows and test/release/pipeline.test.ts
# agree on them.
#   PEEROPS_RELEASE_VERSION  X.Y.Z; default: the tag being built (GITHUB_REF_NAME vX.Y.Z), else package.json's
#   PEEROPS_RELEASE_DIR      the release's assets (default dist/release-X.Y.Z)
#   PEEROPS_APT_REPO         the APT repository, kept across releases (default dist/apt)
#   PEEROPS_CHART_DIR        the packaged chart (default dist/chart)
#   PEEROPS_RELEASE_DRY_RUN  1: publishing steps publish nothing and say what they would do
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
package_version="$(node -p "require('$root/package.json').version")"
if [[ -z "${PEEROPS_RELEASE_VERSION:-}" ]]; then
  if [[ "${GITHUB_REF_TYPE:-}" == "tag" && "${GITHUB_REF_NAME:-}" == v* ]]; then
    PEEROPS_RELEASE_VERSION="${GITHUB_REF_NAME#v}"
  else
    PEEROPS_RELEASE_VERSION="$package_version"
  fi
fi
version="$PEEROPS_RELEASE_VERSION"
release_dir="$(realpath -m "${PEEROPS_RELEASE_DIR:-$root/dist/release-$version}")"
apt_repo="$(realpath -m "${PEEROPS_APT_REPO:-$root/dist/apt}")"
chart_dir="$(realpath -m "${PEEROPS_CHART_DIR:-$root/dist/chart}")"
dry_run="${PEEROPS_RELEASE_DRY_RUN:-0}"

# Publishing steps call `publish <what> <command…>`: runs it, or in a dry run prints it and why not.
publish() {
  local what="$1"
  shift
  if [[ "$dry_run" == "1" ]]; then
    echo "dry run: would publish $what: $*"
  else
    echo "publishing $what"
    "$@"
  fi
}

# The helm of scripts/k8s-tools.sh unless one is on PATH (CI installs it with azure/setup-helm).
helm_bin() {
  if command -v helm >/dev/null; then command -v helm; else echo "$(bash "$root/scripts/k8s-tools.sh" | tail -n1)/helm"; fi
}
