#!/usr/bin/env bash
# Release step 9 (Forgejo): the APT repository published as the `pages` branch of PEEROPS_PAGES_REMOTE
# (a git URL; Forgejo/Codeberg Pages serve that branch as a static site), one commit per release with
# the whole directory. The GitHub workflow serves the same directory with GitHub Pages' own actions
# instead. A dry run commits and pushes to a bare repository in a temporary directory.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

[[ -f "$apt_repo/dists/stable/InRelease" ]] || { echo "publish-apt: no repository in $apt_repo: run build.sh first" >&2; exit 1; }
remote="${PEEROPS_PAGES_REMOTE:-}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ "$dry_run" == "1" ]]; then
  git init --quiet --bare "$work/pages.git"
  echo "dry run: pushing to $work/pages.git instead of ${remote:-<PEEROPS_PAGES_REMOTE>}"
  remote="$work/pages.git"
fi
: "${remote:?PEEROPS_PAGES_REMOTE is not set (the git URL whose pages branch is served)}"
git init --quiet -b pages "$work/site"
cp -a "$apt_repo/." "$work/site/"
git -C "$work/site" add -A
git -C "$work/site" -c user.name="peerops release" -c user.email="release@peerops" commit --quiet -m "apt: peerops $version"
# the branch is the published directory, nothing else: each release replaces it (the pool was fetched first)
git -C "$work/site" push --quiet --force "$remote" pages
echo "publish-apt: $(git -C "$work/site" ls-files | wc -l) files of $apt_repo on the pages branch of $remote"
