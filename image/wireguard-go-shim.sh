#!/bin/sh
# The agent image's `wireguard-go` (docs/kubernetes.md, "Hitless agent rollouts"). With
# PEEROPS_WIREGUARD_KEEPER=1 (the chart sets it when the keeper DaemonSet runs) the daemon is started by
# the keeper (image/wireguard-keeper.ts) in its own container, so that the tunnel outlives this
# container: the shim asks for it with <name>.want in /var/run/wireguard and waits for its UAPI socket.
# Without it, Debian's wireguard-go runs here as usual.
set -eu
if [ -z "${PEEROPS_WIREGUARD_KEEPER:-}" ]; then
  exec /usr/bin/wireguard-go "$@"
fi
name=${1:?usage: wireguard-go <interface>}
dir=/var/run/wireguard # wireguard-go's UAPI socket directory, fixed when it is built
rm -f "$dir/$name.failed"
: > "$dir/$name.want"
tries=0
while [ ! -S "$dir/$name.sock" ]; do
  if [ -f "$dir/$name.failed" ]; then
    echo "wireguard-go $name failed in the WireGuard keeper:" >&2
    cat "$dir/$name.failed" >&2
    exit 1
  fi
  tries=$((tries + 1))
  if [ "$tries" -gt 150 ]; then
    rm -f "$dir/$name.want"
    echo "no WireGuard keeper started $name within 15 s: is the <release>-peerops-wireguard pod running on this node and sharing $dir?" >&2
    exit 1
  fi
  sleep 0.1
done
