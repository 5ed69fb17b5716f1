#!/usr/bin/env bash
# Release step 5: the built release checked as operators check it (docs/release.md#verifying-a-release):
# the signature of SHA256SUMS by the release key, every checksum, the bundle's version, the APT
# repository's InRelease by its own keyring, and the chart's version.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

: "${PEEROPS_RELEASE_SIGNING_KEY:?no release key: run import-keys.sh first}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "release@peerops namespaces=\"peerops-release\" $(ssh-keygen -y -f "$PEEROPS_RELEASE_SIGNING_KEY")" >"$work/allowed_signers"
(
  cd "$release_dir" || exit
  ssh-keygen -Y verify -f "$work/allowed_signers" -I release@peerops -n peerops-release -s SHA256SUMS.sig <SHA256SUMS
  sha256sum -c SHA256SUMS
  printed="$(node peerops.mjs --version)"
  [[ "$printed" == *"$version"* ]] || { echo "verify: peerops.mjs --version says $printed, not $version" >&2; exit 1; }
)
gpg --dearmor <"$apt_repo/peerops-archive-keyring.asc" >"$work/keyring.gpg"
gpgv --keyring "$work/keyring.gpg" "$apt_repo/dists/stable/InRelease"
grep -rq --include=Packages "^Filename: pool/main/p/peerops-agent/peerops-agent_${version}_all.deb$" "$apt_repo/dists/stable/main/"
tar -xzOf "$chart_dir/peerops-$version.tgz" peerops/Chart.yaml | grep -q "^version: $version$"
echo "verify: release $version, its APT repository and chart check out"
