#!/usr/bin/env bash
# A single-node Kubernetes from real parts, each phase timed, stopping at the first phase that fails with
# that component's own last error lines (docs/kubernetes.md, "Tested on a real node"):
#   tools       kubelet, kube-controller-manager, kube-scheduler, kube-proxy (and etcd, kube-apiserver,
#               kubectl, helm) built by scripts/cluster/tools.sh, before the node's namespace is entered
#   pause       the pod sandbox image: a static Go binary packed with umoci, docker-archive by skopeo
#   apiserver   etcd + kube-apiserver on the node's address (token auth, Node,RBAC authorization), its serving
#               certificate signed by the cluster CA that pods trust (kube-root-ca.crt)
#   containerd  Debian's containerd with runc, its own root, state and socket under the work dir
#   kubelet     cgroupfs driver on this cgroup v1 host (failCgroupV1: false), a bridge CNI network
#   node-ready  the Node object reports Ready
#   pod         a plain pod with the locally imported image reaches Running
#   control     kube-controller-manager and kube-scheduler: a Deployment without nodeName becomes Available
#   proxy       kube-proxy in iptables mode: the `kubernetes` Service's cluster IP leads to the API server
#   controller  with PEEROPS_CLUSTER_IMAGES=DIR (the --out of `npm run build:image`): the controller image
#               imported from its docker-archive runs as the chart runs it (uid 10001, read-only root) and
#               turns Ready on the chart's readiness probe
#   in-cluster  with PEEROPS_CLUSTER_IMAGES: a pod reads the API through the `kubernetes` Service with its
#               ServiceAccount's token and the cluster CA, as a client's in-cluster configuration does
# Needs root. Usage: node.sh [--keep]  (--keep leaves the node up and prints how to reach it, the line
# `cluster: ready netns=<namespace> kubeconfig=<file> containerd=<socket>`; Ctrl-C or SIGTERM stops)
# Everything it starts is stopped and everything it mounts or creates is removed on exit.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
keep=0
[[ "${1:-}" == "--keep" ]] && keep=1
[[ $(id -u) == 0 ]] || {
  echo "node.sh: needs root (containerd, kubelet)" >&2
  exit 2
}

# The whole node runs inside a network namespace made here: its bridge, veths, addresses and any rules
# the CNI adds live and die with it, and the host's own network is never touched. The outer run makes the
# namespace, runs this script inside it and removes it and the pods' namespaces afterwards.
if [[ -z "${PEEROPS_CLUSTER_NETNS:-}" ]]; then
  # --- tools (here, outside the node's namespace: a cold build fetches Go modules) -------------------
  echo "cluster: phase tools ..." >&2
  tools_start=$(date +%s.%N)
  PEEROPS_CLUSTER_BIN="$(bash "$root/scripts/cluster/tools.sh" | tail -n1)" || {
    echo "cluster: phase tools FAILED: build failed" >&2
    exit 1
  }
  export PEEROPS_CLUSTER_BIN
  echo "cluster: phase tools ok in $(printf '%.1f' "$(echo "$(date +%s.%N) - $tools_start" | bc)")s (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  ns="peerops-cluster-$$"
  netns_before="$(ip netns list 2>/dev/null | awk '{print $1}' | sort)"
  ip netns add "$ns"
  trap 'ip netns delete "$ns" 2>/dev/null' EXIT
  marker="$(mktemp /tmp/peerops-cluster-start-XXXXXX)"
  had_kubepods=0
  [[ -d /sys/fs/cgroup/pids/kubepods ]] && had_kubepods=1
  had_run_containerd=0
  [[ -d /run/containerd ]] && had_run_containerd=1
  ip -n "$ns" link set lo up
  # The node's address, on lo (this kernel has no dummy links): kubelet refuses a 127.0.0.0/8 node IP.
  ip -n "$ns" addr add 10.250.0.1/32 dev lo
  # A route for the Services' range, as a node's default route gives one: a packet is routed before
  # kube-proxy's rules rewrite its destination, and without one the node's own programs (the API server
  # calling the admission webhook, the agent with hostNetwork) get "Network is unreachable".
  ip -n "$ns" route add 10.96.0.0/24 dev lo src 10.250.0.1
  rc=0
  # nsenter, not `ip netns exec`: that remounts /sys and so hides the host's cgroup mounts from kubelet.
  nsenter --net="/var/run/netns/$ns" env PEEROPS_CLUSTER_NETNS="$ns" bash "$0" "$@" &
  inner=$!
  # A stop request goes to the inner run, whose own trap stops what it started; then this one cleans up.
  trap 'kill -TERM "$inner" 2>/dev/null' TERM INT
  while :; do
    wait "$inner" && rc=0 || rc=$?
    kill -0 "$inner" 2>/dev/null || break
  done
  trap - TERM INT
  # From here every step runs whatever the one before did (a run that stopped before its first pod has
  # no pod namespace, and grep's no-match must not end the cleanup).
  set +e
  # The pods' namespaces (containerd names them cni-<uuid>); other programs' namespaces are left alone.
  comm -13 <(echo "$netns_before") <(ip netns list 2>/dev/null | awk '{print $1}' | sort) | grep '^cni-' |
    while read -r left; do ip netns delete "$left"; done
  # What kubelet, containerd and the CNI plugins keep outside the work dir: the pods' cgroups, the
  # plugins' result cache, the shims' sockets.
  ((had_kubepods)) || find /sys/fs/cgroup/*/kubepods -depth -type d -exec rmdir {} + 2>/dev/null
  find /var/lib/cni/results -newer "$marker" \( -name 'peerops-pods-*' -o -name 'cni-loopback-*' \) -delete 2>/dev/null
  find /run/containerd/s -newer "$marker" -type s -delete 2>/dev/null
  ((had_run_containerd)) || rm -rf /run/containerd
  rm -f "$marker"
  exit "$rc"
fi

work="$(mktemp -d /tmp/peerops-cluster-XXXXXX)"
node="peerops-node"
node_ip=10.250.0.1
pids=()
phase="setup"
phase_start=$(date +%s.%N)

log() { echo "cluster: $*" >&2; }
begin() {
  phase="$1"
  phase_start=$(date +%s.%N)
  log "phase $phase ..."
}
done_phase() {
  log "phase $phase ok in $(printf '%.1f' "$(echo "$(date +%s.%N) - $phase_start" | bc)")s (load $(cut -d' ' -f1-3 /proc/loadavg))"
}
fail() { # message [log file]
  log "phase $phase FAILED: $1"
  if [[ -n "${2:-}" && -f "$2" ]]; then
    log "last error lines of $2:"
    grep -E 'level=error|level=fatal|^E[0-9]{4}|^F[0-9]{4}|[Ee]rror' "$2" | tail -n 15 >&2 || tail -n 15 "$2" >&2
  fi
  exit 1
}
wait_until() { # seconds command...
  local deadline=$(($(date +%s) + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    (($(date +%s) < deadline)) || return 1
    sleep 0.5
  done
}

is_ready() { # kind name: whether the object's Ready condition is True
  [[ "$(k get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}

cleanup() {
  set +e
  if [[ -n "${kubectl:-}" && -f "$work/admin.kubeconfig" ]]; then
    "$kubectl" --kubeconfig "$work/admin.kubeconfig" delete pod --all -A --wait=false >/dev/null 2>&1
  fi
  # Stop in reverse order of start: kubelet, containerd, kube-apiserver, etcd.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[i]}" 2>/dev/null
    for _ in $(seq 50); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.1; done
    kill -9 "${pids[i]}" 2>/dev/null
  done
  # The shims outlive containerd: kill those that serve this work dir's containerd, then their containers.
  for shim in $(pgrep -f "containerd-shim.*-address $work/containerd.sock" || true); do
    pkill -9 -P "$shim" 2>/dev/null
    kill -9 "$shim" 2>/dev/null
  done
  # Mounts under the work dir (overlay roots, shm, kubelet volumes), deepest first.
  awk -v w="$work" '$2 ~ "^"w {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "$m"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

bin="$PEEROPS_CLUSTER_BIN"
kubectl="$bin/kubectl"
log "kubelet $("$bin/kubelet" --version 2>&1), containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | head -n1 | awk '{print $3}')"

# --- pause -------------------------------------------------------------------------------------------
begin pause
pause_image="peerops.test/pause:1"
mkdir -p "$work/pause/src" "$work/pause/bundle"
cat >"$work/pause/src/main.go" <<'EOF'
// The pod sandbox's process: holds the pod's namespaces until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
EOF
(cd "$work/pause/src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$work/pause/pause" main.go) ||
  fail "go build of the pause binary"
umoci init --layout "$work/pause/layout"
umoci new --image "$work/pause/layout:pause"
umoci unpack --image "$work/pause/layout:pause" "$work/pause/bundle" >/dev/null
install -m 0755 "$work/pause/pause" "$work/pause/bundle/rootfs/pause"
umoci repack --image "$work/pause/layout:pause" "$work/pause/bundle"
umoci config --image "$work/pause/layout:pause" --config.entrypoint /pause
skopeo copy -q "oci:$work/pause/layout:pause" "docker-archive:$work/pause.docker.tar:$pause_image" || fail "skopeo copy"
done_phase

# --- apiserver ---------------------------------------------------------------------------------------
begin apiserver
etcd_port=$(free_port)
etcd_peer=$(free_port)
api_port=$(free_port)
admin_token="$(openssl rand -hex 24)"
node_token="$(openssl rand -hex 24)"
proxy_token="$(openssl rand -hex 24)"
# system:kube-proxy: the bootstrap policy binds it to the system:node-proxier role.
cat >"$work/tokens.csv" <<EOF
$admin_token,cluster-admin,1,"system:masters"
$node_token,system:node:$node,2,"system:nodes"
$proxy_token,system:kube-proxy,3
EOF
openssl genrsa -out "$work/sa.key" 2048 2>/dev/null
openssl rsa -in "$work/sa.key" -pubout -out "$work/sa.pub" 2>/dev/null
# The cluster CA: it signs the API server's serving certificate, and the controller-manager publishes it
# to every namespace (kube-root-ca.crt), so that pods verify the API server they reach by its Service.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out "$work/ca.crt" -days 1 \
  -subj /CN=peerops-cluster-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$work/apiserver.key" -out "$work/apiserver.csr" \
  -subj /CN=kube-apiserver 2>/dev/null
printf 'subjectAltName=%s\n' "IP:10.96.0.1,IP:$node_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost" \
  >"$work/apiserver.ext"
openssl x509 -req -in "$work/apiserver.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -days 1 -extfile "$work/apiserver.ext" -out "$work/apiserver.crt" 2>/dev/null
"$bin/etcd" --name=node --data-dir="$work/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="node=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync --log-level=warn >"$work/etcd.log" 2>&1 &
pids+=($!)
wait_until 30 curl -sf "http://127.0.0.1:$etcd_port/health" || fail "etcd not healthy in 30 s" "$work/etcd.log"
# Every address of the node's namespace (its lo and the pods' bridge; nothing outside it reaches them),
# advertised on the node's address: the `kubernetes` Service's endpoint, which pods reach by kube-proxy.
"$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" --bind-address=0.0.0.0 \
  --advertise-address="$node_ip" --secure-port="$api_port" \
  --tls-cert-file="$work/apiserver.crt" --tls-private-key-file="$work/apiserver.key" \
  --token-auth-file="$work/tokens.csv" --service-account-key-file="$work/sa.pub" \
  --service-account-signing-key-file="$work/sa.key" --service-account-issuer=https://kubernetes.default.svc \
  --service-cluster-ip-range=10.96.0.0/24 --authorization-mode=Node,RBAC --allow-privileged=true \
  --kubelet-preferred-address-types=InternalIP \
  --v=0 >"$work/apiserver.log" 2>&1 &
pids+=($!)
kubeconfig() { # file user token
  "$kubectl" config --kubeconfig "$1" set-cluster node --server="https://127.0.0.1:$api_port" --insecure-skip-tls-verify=true >/dev/null
  "$kubectl" config --kubeconfig "$1" set-credentials "$2" --token="$3" >/dev/null
  "$kubectl" config --kubeconfig "$1" set-context node --cluster=node --user="$2" >/dev/null
  "$kubectl" config --kubeconfig "$1" use-context node >/dev/null
}
kubeconfig "$work/admin.kubeconfig" cluster-admin "$admin_token"
kubeconfig "$work/kubelet.kubeconfig" "system:node:$node" "$node_token"
kubeconfig "$work/kube-proxy.kubeconfig" system:kube-proxy "$proxy_token"
k() { "$kubectl" --kubeconfig "$work/admin.kubeconfig" "$@"; }
wait_until 60 k get --raw /readyz || fail "kube-apiserver not ready in 60 s" "$work/apiserver.log"
done_phase

# --- containerd --------------------------------------------------------------------------------------
begin containerd
mkdir -p "$work/cni"
# A bridge inside the node's network namespace; no masquerading (pods reach only the node and each other).
cat >"$work/cni/10-bridge.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "peerops-pods",
  "plugins": [
    {
      "type": "bridge", "bridge": "pods0", "isGateway": true, "ipMasq": false,
      "ipam": { "type": "host-local", "dataDir": "$work/cni-ipam", "ranges": [[{ "subnet": "10.250.1.0/24" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "loopback" }
  ]
}
EOF
cat >"$work/containerd.toml" <<EOF
version = 2
root = "$work/containerd/root"
state = "$work/containerd/state"
[grpc]
  address = "$work/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # This sandbox withholds CAP_SYS_RESOURCE, so runc may not lower oom_score_adj below its own (the
  # kubelet asks -998 for pod sandboxes: "nsexec: failed to update /proc/self/oom_score_adj: Permission
  # denied"); containerd then clamps the request to its own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$work/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$work/cni"
EOF
containerd --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
pids+=($!)
ctr() { command ctr --address "$work/containerd.sock" "$@"; }
wait_until 30 ctr version || fail "containerd not answering in 30 s" "$work/containerd.log"
ctr -n k8s.io images import --no-unpack "$work/pause.docker.tar" >/dev/null || fail "ctr images import" "$work/containerd.log"
done_phase

# --- kubelet -----------------------------------------------------------------------------------------
begin kubelet
kubelet_port=$(free_port)
healthz_port=$(free_port)
mkdir -p "$work/manifests"
cat >"$work/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$work/containerd.sock
# This host's /sys/fs/cgroup is cgroup v1 (per-controller mounts); kubelets since 1.35 refuse it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
staticPodPath: $work/manifests
podLogsDir: $work/pod-logs
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
authorization:
  mode: AlwaysAllow
# A shared development disk: evicting for disk pressure would measure the neighbours, not this node.
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%" }
imageGCHighThresholdPercent: 100
registerNode: true
EOF
"$bin/kubelet" --config="$work/kubelet.yaml" --kubeconfig="$work/kubelet.kubeconfig" \
  --root-dir="$work/kubelet" --cert-dir="$work/kubelet/pki" --hostname-override="$node" \
  --node-ip="$node_ip" --v=1 >"$work/kubelet.log" 2>&1 &
pids+=($!)
wait_until 60 curl -sf "http://127.0.0.1:$healthz_port/healthz" ||
  { kill -0 "${pids[-1]}" 2>/dev/null || fail "kubelet exited" "$work/kubelet.log"; fail "kubelet not healthy in 60 s" "$work/kubelet.log"; }
done_phase

# --- node-ready --------------------------------------------------------------------------------------
begin node-ready
if ! wait_until 90 is_ready node "$node"; then
  k get node "$node" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{"\n"}{end}' >&2 || true
  fail "node not Ready in 90 s" "$work/kubelet.log"
fi
done_phase

# --- pod ---------------------------------------------------------------------------------------------
begin pod
k create serviceaccount default >/dev/null 2>&1 || true
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: { name: local-image, namespace: default }
spec:
  # Bound by name: this phase runs no scheduler.
  nodeName: $node
  automountServiceAccountToken: false
  containers:
    - { name: pause, image: $pause_image, imagePullPolicy: Never }
EOF
running() { [[ "$(k get pod local-image -o jsonpath='{.status.phase}')" == Running ]]; }
if ! wait_until 90 running; then
  k get pod local-image -o jsonpath='{.status}' >&2 || true
  echo >&2
  k get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 10 >&2 || true
  fail "pod not Running in 90 s" "$work/kubelet.log"
fi
done_phase

# --- control ---------------------------------------------------------------------------------------
# kube-controller-manager and kube-scheduler: a Deployment (no nodeName) becomes Available.
begin control
"$bin/kube-controller-manager" --kubeconfig="$work/admin.kubeconfig" --bind-address=127.0.0.1 \
  --secure-port="$(free_port)" --service-account-private-key-file="$work/sa.key" \
  --root-ca-file="$work/ca.crt" --cluster-signing-cert-file="$work/ca.crt" \
  --cluster-signing-key-file="$work/ca.key" --use-service-account-credentials=true \
  --leader-elect=false --controllers='*,-nodeipam,-cloud-node-lifecycle' --v=0 >"$work/controller-manager.log" 2>&1 &
pids+=($!)
"$bin/kube-scheduler" --kubeconfig="$work/admin.kubeconfig" --bind-address=127.0.0.1 \
  --secure-port="$(free_port)" --leader-elect=false --v=0 >"$work/scheduler.log" 2>&1 &
pids+=($!)
k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: { name: scheduled, namespace: default }
spec:
  replicas: 1
  selector: { matchLabels: { app: scheduled } }
  template:
    metadata: { labels: { app: scheduled } }
    spec:
      automountServiceAccountToken: false
      containers:
        - { name: pause, image: $pause_image, imagePullPolicy: Never }
EOF
available() { [[ "$(k get deployment scheduled -o jsonpath='{.status.availableReplicas}')" == 1 ]]; }
if ! wait_until 120 available; then
  k get pods -o wide >&2 || true
  k get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 8 >&2 || true
  grep -E '^E[0-9]{4}' "$work/scheduler.log" | tail -n 5 >&2 || true
  fail "Deployment not Available in 120 s" "$work/controller-manager.log"
fi
done_phase

# --- proxy -------------------------------------------------------------------------------------------
# kube-proxy in iptables mode, in the node's namespace: Services' cluster IPs lead to their endpoints,
# the `kubernetes` Service's to the API server on the node's address.
begin proxy
cat >"$work/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: { kubeconfig: $work/kube-proxy.kubeconfig }
hostnameOverride: $node
clusterCIDR: 10.250.1.0/24
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
# The conntrack limits and timeouts are the host kernel's: 0 leaves them as they are.
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
iptables: { localhostNodePorts: false }
EOF
"$bin/kube-proxy" --config="$work/kube-proxy.yaml" --v=1 >"$work/kube-proxy.log" 2>&1 &
pids+=($!)
# The Service's cluster IP as pods see it, answered by the API server behind it (401 without a token).
api_by_service() { [[ "$(curl -sk -o /dev/null -w '%{http_code}' --max-time 2 https://10.96.0.1/readyz)" =~ ^(200|401|403)$ ]]; }
if ! wait_until 60 api_by_service; then
  iptables-save -t nat 2>/dev/null | grep KUBE-SVC | head -n 5 >&2 || true
  fail "the kubernetes Service's cluster IP does not reach the API server in 60 s" "$work/kube-proxy.log"
fi
done_phase

# --- controller --------------------------------------------------------------------------------------
if [[ -n "${PEEROPS_CLUSTER_IMAGES:-}" ]]; then
  begin controller
  archive="$(ls "$PEEROPS_CLUSTER_IMAGES"/peerops-controller-*.docker.tar | tail -n1)" ||
    fail "no controller docker-archive in $PEEROPS_CLUSTER_IMAGES"
  image="$(ctr -n k8s.io images import "$archive" | sed -n 's/^unpacking \([^ ]*\) .*/\1/p' | head -n1)"
  [[ -n "$image" ]] || fail "ctr images import $archive" "$work/containerd.log"
  log "imported $image from $archive"
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: { name: controller, namespace: default }
spec:
  nodeName: $node
  automountServiceAccountToken: false
  securityContext: { runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 }
  containers:
    - name: controller
      image: $image
      imagePullPolicy: Never
      env:
        - { name: PEEROPS_DATA, value: /var/lib/peerops }
        - { name: PEEROPS_LISTEN, value: ":8080" }
        - { name: PEEROPS_ADMIN_ASNS, value: "4242420000" }
      readinessProbe: { httpGet: { path: /livez, port: 8080 }, periodSeconds: 2 }
      securityContext:
        { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: [ALL] } }
      volumeMounts: [{ name: data, mountPath: /var/lib/peerops }]
  volumes: [{ name: data, emptyDir: {} }]
EOF
  if ! wait_until 120 is_ready pod controller; then
    k get pod controller -o jsonpath='{.status.containerStatuses}' >&2 || true
    tail -n 15 "$work"/pod-logs/default_controller_*/controller/*.log >&2 2>/dev/null || true
    fail "controller pod not Ready in 120 s" "$work/kubelet.log"
  fi
  done_phase

  # --- in-cluster ------------------------------------------------------------------------------------
  # What a client's in-cluster configuration does (the controller's on the Kubernetes store): the API
  # server at KUBERNETES_SERVICE_HOST, verified with the ServiceAccount's ca.crt, its token as bearer.
  begin in-cluster
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: { name: in-cluster, namespace: default }
spec:
  nodeName: $node
  restartPolicy: Never
  securityContext: { runAsUser: 10001, runAsGroup: 10001 }
  containers:
    - name: review
      image: $image
      imagePullPolicy: Never
      command:
        - /usr/local/bin/node
        - -e
        - |
          const fs = require('node:fs');
          const dir = '/var/run/secrets/kubernetes.io/serviceaccount/';
          const req = require('node:https').request({
            host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT, method: 'POST',
            path: '/apis/authentication.k8s.io/v1/selfsubjectreviews', ca: fs.readFileSync(dir + 'ca.crt'),
            headers: { authorization: 'Bearer ' + fs.readFileSync(dir + 'token', 'utf8'), 'content-type': 'application/json' },
          }, (res) => {
            let body = '';
            res.on('data', (c) => (body += c));
            res.on('end', () => {
              console.log(res.statusCode, JSON.parse(body).status?.userInfo?.username ?? body);
              process.exit(res.statusCode === 201 ? 0 : 1);
            });
          });
          req.on('error', (err) => { console.error(err.message); process.exit(1); });
          req.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }));
EOF
  reviewed() { [[ "$(k get pod in-cluster -o jsonpath='{.status.phase}')" =~ ^(Succeeded|Failed)$ ]]; }
  wait_until 120 reviewed || fail "in-cluster pod not finished in 120 s" "$work/kubelet.log"
  answer="$(cat "$work"/pod-logs/default_in-cluster_*/review/*.log 2>/dev/null | sed 's/^[^ ]* [^ ]* [^ ]* //')"
  [[ "$(k get pod in-cluster -o jsonpath='{.status.phase}')" == Succeeded ]] ||
    fail "a pod's in-cluster request through the kubernetes Service: $answer"
  log "through the kubernetes Service ($(k get svc kubernetes -o jsonpath='{.spec.clusterIP}')): $answer"
  done_phase
fi

log "all phases passed"
if ((keep)); then
  log "kubeconfig: $work/admin.kubeconfig; containerd: $work/containerd.sock; Ctrl-C stops and removes all"
  # For a caller driving the node (test/cluster/): kubectl and helm run in the namespace (nsenter --net).
  log "ready netns=$PEEROPS_CLUSTER_NETNS kubeconfig=$work/admin.kubeconfig containerd=$work/containerd.sock"
  # In the background so that a signal reaches the trap at once.
  while true; do
    sleep 3600 &
    wait $!
  done
fi
