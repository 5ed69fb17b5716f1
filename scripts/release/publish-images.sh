#!/usr/bin/env bash
# Release step 7: the container images (peerops-<image>-X.Y.Z.oci.tar of the build) copied with skopeo
# to PEEROPS_IMAGE_REGISTRY (e.g. ghcr.io/<owner>) as <registry>/peerops-<image>:X.Y.Z; registry login is
# the workflow's (skopeo login). Each pushed digest is written as `<image>-digest=sha256:…` to
# $GITHUB_OUTPUT, which the workflow's attestation step signs for that image. A dry run copies into a
# local OCI layout (PEEROPS_RELEASE_DIR/oci-layout) instead of a registry, so the same copy runs.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

shopt -s nullglob
archives=("$release_dir"/peerops-*-"$version".oci.tar)
if ((${#archives[@]} == 0)); then
  echo "publish-images: no images in $release_dir (built with PEEROPS_RELEASE_IMAGES=0): nothing to publish"
  exit 0
fi
registry="${PEEROPS_IMAGE_REGISTRY:-}"
if [[ "$dry_run" != "1" && -z "$registry" ]]; then
  echo "publish-images: PEEROPS_IMAGE_REGISTRY is not set (e.g. ghcr.io/<owner>)" >&2
  exit 1
fi
for archive in "${archives[@]}"; do
  name="$(basename "$archive" "-$version.oci.tar")" # peerops-controller, peerops-agent
  image="${name#peerops-}"
  if [[ "$dry_run" == "1" ]]; then
    dest="oci:$release_dir/oci-layout:$name:$version"
    echo "dry run: ${registry:-<registry>}/$name:$version copied to $dest instead"
  else
    dest="docker://$registry/$name:$version"
  fi
  skopeo copy --quiet --digestfile "$release_dir/$name.digest" "oci-archive:$archive" "$dest"
  digest="$(cat "$release_dir/$name.digest")"
  echo "publish-images: $dest $digest"
  [[ -n "${GITHUB_OUTPUT:-}" ]] && echo "$image-digest=$digest" >>"$GITHUB_OUTPUT"
done
