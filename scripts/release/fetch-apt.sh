#!/usr/bin/env bash
# Release step 2: the published APT repository's pool, fetched into PEEROPS_APT_REPO before the build,
# since the pool is the repository's only state and each build makes every index from it
# (docs/release.md#the-apt-repository). $1 is where it is served (the Pages site); a site that has no
# repository yet (the first release) leaves an empty pool. Only the pool is fetched: the indexes and
# their signatures are made again by the build.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

base="${1:?usage: fetch-apt.sh <URL of the published APT repository>}"
base="${base%/}"
mkdir -p "$apt_repo"
# Only a 404 means "no repository yet": any other failure stops the release, since a build from an empty
# pool would publish indexes without every earlier version.
status="$(curl -sS --retry 3 -o "$apt_repo/.Release" -w '%{http_code}' "$base/dists/stable/Release")"
if [[ "$status" == "404" ]]; then
  rm -f "$apt_repo/.Release"
  echo "fetch-apt: no repository at $base yet (404): starting with an empty pool"
  exit 0
fi
[[ "$status" == "200" ]] || { echo "fetch-apt: $base/dists/stable/Release answered $status" >&2; exit 1; }
release_file="$(cat "$apt_repo/.Release")"
rm -f "$apt_repo/.Release"
# every Packages index the Release file names, then every file those list
count=0
# shellcheck disable=SC2013 # index paths and file names have no spaces (dists/…/Packages, pool/…/*.deb)
for index in $(awk '/^SHA256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && $3 ~ /\/Packages$/ { print $3 }' <<<"$release_file" | sort -u); do
  for file in $(curl -fsS --retry 3 "$base/dists/stable/$index" | awk '/^Filename: / { print $2 }'); do
    if [[ ! -f "$apt_repo/$file" ]]; then
      mkdir -p "$(dirname "$apt_repo/$file")"
      curl -fsS --retry 3 -o "$apt_repo/$file.part" "$base/$file"
      mv "$apt_repo/$file.part" "$apt_repo/$file"
      count=$((count + 1))
    fi
  done
done
echo "fetch-apt: $count package files from $base into $apt_repo"
