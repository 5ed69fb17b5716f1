#!/usr/bin/env bash
# Release step 6: the npm package, the release's peerops-X.Y.Z.tgz, published with provenance (npm's
# signed statement that this workflow built it from this commit; only GitHub Actions and GitLab CI can
# make one, so only the GitHub workflow runs this step). The job needs `id-token: write`; npm's trusted
# publishing takes it instead of a token (or NODE_AUTH_TOKEN). A dry run packs and checks the
# tarball with `npm publish --dry-run`, which contacts no registry for writing.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

tarball="$release_dir/peerops-$version.tgz"
[[ -f "$tarball" ]] || { echo "publish-npm: $tarball is missing: run build.sh first" >&2; exit 1; }
tag=latest
[[ "$version" == *-* ]] && tag=next # a prerelease is not what `npm install peerops` takes
if [[ "$dry_run" == "1" ]]; then
  npm publish --dry-run --tag "$tag" "$tarball"
else
  npm publish --provenance --access public --tag "$tag" "$tarball"
fi
