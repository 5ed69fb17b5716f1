#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages, once. Idempotent: a machine that has
# everything returns at once. Network namespace tests need root; so does apt-get.
set -euo pipefail

declare -A need=(
  [bird]=bird2
  [wg]=wireguard-tools
  [wireguard-go]=wireguard-go
  [ip]=iproute2
  [promtool]=prometheus
  [ping]=iputils-ping
  [git]=git
  [ssh-keygen]=openssh-client
  [gpg]=gnupg
  [redis-server]=redis-server
  [curl]=curl
  [openssl]=openssl
  [chromium]=chromium
  [vtysh]=frr
  [strings]=binutils
  [/usr/lib/systemd/systemd-networkd]=systemd
  # a disk failing mid-run: ext4 on a loop device, shut down by ioctl (test/store/failing-disk.test.ts)
  [mkfs.ext4]=e2fsprogs
  [losetup]=mount
  [python3]=python3
  # the container images (scripts/build-image.ts, test/image)
  [mmdebstrap]=mmdebstrap
  [umoci]=umoci
  [skopeo]=skopeo
  [runc]=runc
  [setpriv]=util-linux
  # the real-node cluster (scripts/cluster/node.sh, npm run test:cluster)
  [containerd]=containerd
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables
  [nsenter]=util-linux
  [bc]=bc
  # the release's APT repository (scripts/apt-repo.ts, test/release/apt-repo.test.ts)
  [apt-ftparchive]=apt-utils
  # the release workflows' shell steps, checked by actionlint (scripts/actionlint.sh)
  [shellcheck]=shellcheck
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "test-prereqs: missing ${missing[*]}; run as root or install them with apt-get" >&2
    exit 1
  fi
  echo "test-prereqs: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts a system BIRD, Prometheus and FRR on install; the tests run their own.
for svc in bird prometheus prometheus-node-exporter frr; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done
# peerops-wireguard (the userspace WireGuard host the agent prefers to wireguard-go) for
# test/agent/wireguard-host.test.ts: built once into .cache/, before the tests run in parallel.
bash "$(dirname "$0")/build-wireguard-host.sh" >/dev/null
# Gitea, the real forge test/gitops/adopt-pull-request.test.ts opens pull requests on: built once into
# .cache/ (minutes on 2 cores), before the tests run in parallel.
bash "$(dirname "$0")/gitea-tools.sh" >/dev/null
