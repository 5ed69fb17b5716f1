#!/usr/bin/env bash
# Release step 1: the signing keys from the CI secrets (docs/release.md#the-release-pipeline).
#   PEEROPS_RELEASE_SSH_KEY  the release key (an OpenSSH private key without passphrase), for SHA256SUMS.sig
#   PEEROPS_APT_GPG_KEY      the APT repository key (armoured OpenPGP secret key), for InRelease/Release.gpg
# Writes the SSH key 0600 into a directory of its own and imports the OpenPGP key into gpg's keyring
# (GNUPGHOME), then names both for the build step as PEEROPS_RELEASE_SIGNING_KEY and
# PEEROPS_APT_SIGNING_KEY lines, appended to $GITHUB_ENV when set (both Actions read it), else printed.
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

: "${PEEROPS_RELEASE_SSH_KEY:?the release SSH private key (secret PEEROPS_RELEASE_SSH_KEY) is not set}"
: "${PEEROPS_APT_GPG_KEY:?the APT repository OpenPGP key (secret PEEROPS_APT_GPG_KEY) is not set}"

keys="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/peerops-keys.XXXXXX")"
chmod 700 "$keys"
(umask 077 && printf '%s\n' "$PEEROPS_RELEASE_SSH_KEY" >"$keys/release")
public="$(ssh-keygen -y -f "$keys/release")"

fingerprint="$(printf '%s\n' "$PEEROPS_APT_GPG_KEY" | gpg --batch --quiet --import-options show-only --import --with-colons |
  awk -F: '$1 == "fpr" { print $10; exit }')"
printf '%s\n' "$PEEROPS_APT_GPG_KEY" | gpg --batch --quiet --import
echo "release key: $public" >&2
echo "APT key: $fingerprint" >&2

lines="PEEROPS_RELEASE_SIGNING_KEY=$keys/release
PEEROPS_APT_SIGNING_KEY=$fingerprint"
if [[ -n "${GITHUB_ENV:-}" ]]; then echo "$lines" >>"$GITHUB_ENV"; else echo "$lines"; fi
