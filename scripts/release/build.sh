#!/usr/bin/env bash
# Release step 4: every asset of the release, signed, and the APT repository
# (`npm run build:release`, docs/release.md#cutting-a-release), then the chart (`helm package`,
# version and appVersion the release's). Needs the keys of import-keys.sh; PEEROPS_RELEASE_IMAGES=0
# leaves the images out (they need mmdebstrap, umoci and skopeo).
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$root" || exit

: "${PEEROPS_RELEASE_SIGNING_KEY:?no release key: run import-keys.sh first}"
: "${PEEROPS_APT_SIGNING_KEY:?no APT repository key: run import-keys.sh first}"
flags=()
[[ "${PEEROPS_RELEASE_IMAGES:-1}" == "0" ]] && flags+=(--no-images)
npm run --silent build:release -- --version "$version" --out "$release_dir" --apt-repo "$apt_repo" "${flags[@]}"

mkdir -p "$chart_dir"
"$(helm_bin)" package charts/peerops --version "$version" --app-version "$version" --destination "$chart_dir"
