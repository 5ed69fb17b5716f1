#!/usr/bin/env bash
# Release step 10: the release named after the tag, its assets every file of PEEROPS_RELEASE_DIR with
# names unchanged (the agents' updater fetches them by name: docs/release.md), marked prerelease for
# X.Y.Z-*. On GitHub with `gh release create` (GH_TOKEN); on Forgejo with its API (FORGEJO_TOKEN,
# GITHUB_SERVER_URL and GITHUB_REPOSITORY, which Forgejo Actions sets too). A dry run lists what it
# would upload.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

tag="v$version"
mapfile -t assets < <(find "$release_dir" -maxdepth 1 -type f \( -name 'peerops*' -o -name 'SHA256SUMS*' \) ! -name '*.digest' | sort)
((${#assets[@]})) || { echo "publish-assets: no assets in $release_dir: run build.sh first" >&2; exit 1; }
prerelease=false
[[ "$version" == *-* ]] && prerelease=true
if [[ "$dry_run" == "1" ]]; then
  echo "dry run: would create release $tag (prerelease: $prerelease) with ${#assets[@]} assets:"
  printf '  %s\n' "${assets[@]##*/}"
  exit 0
fi
server="${GITHUB_SERVER_URL:-https://github.com}"
if [[ "$server" == "https://github.com" ]]; then
  flags=(--verify-tag --title "peerops $version" --notes "CHANGELOG.md, section [$version]")
  [[ "$prerelease" == true ]] && flags+=(--prerelease)
  gh release create "$tag" "${flags[@]}" "${assets[@]}"
  exit 0
fi
: "${FORGEJO_TOKEN:?FORGEJO_TOKEN is not set (a token that may write releases of the repository)}"
api="$server/api/v1/repos/$GITHUB_REPOSITORY/releases"
body="$(node -e 'const [tag, version, prerelease] = process.argv.slice(1);
console.log(JSON.stringify({ tag_name: tag, name: "peerops " + version, body: "CHANGELOG.md, section [" + version + "]", prerelease: prerelease === "true" }))' "$tag" "$version" "$prerelease")"
id="$(curl -fsS -X POST -H "Authorization: token $FORGEJO_TOKEN" -H 'Content-Type: application/json' -d "$body" "$api" |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).id))')"
for asset in "${assets[@]}"; do
  curl -fsS -X POST -H "Authorization: token $FORGEJO_TOKEN" -F "attachment=@$asset" \
    "$api/$id/assets?name=$(basename "$asset")" >/dev/null
  echo "publish-assets: $(basename "$asset")"
done
