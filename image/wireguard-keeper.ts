/**
 * The WireGuard keeper of the agent image (docs/kubernetes.md, "Hitless agent rollouts"): runs the
 * node's userspace tunnels in a container of its own, so that they outlive the agent's container. A
 * tunnel's TUN device dies with its process, and a container's processes die with it: an agent that ran
 * them itself would drop every tunnel on each rollout.
 *
 * peerops-wireguard (the agent's choice when the kernel has no WireGuard): the keeper runs its host,
 * `peerops-wireguard --serve`, and starts it again if it exits. The agent's `peerops-wireguard` commands
 * reach it through its control socket, which belongs to the network namespace both containers share
 * (hostNetwork), and with PEEROPS_WIREGUARD_KEEPER set they wait for it rather than start a host of
 * their own.
 *
 * wireguard-go (PEEROPS_WIREGUARD=wireguard-go): the agent asks for a daemon through the shim it runs as
 * `wireguard-go` (image/wireguard-go-shim.sh): the shim writes `<name>.want` into the shared /var/run/wireguard, the keeper takes the request away and
 * starts `wireguard-go -f <name>` as its own child, whose UAPI socket `<name>.sock` the agent then uses
 * as always. Deleting the link (the agent's `ip link del`) ends the daemon; the keeper reaps it. A failed
 * start is answered with `<name>.failed` holding wireguard-go's output.
 *
 *   node /opt/peerops/wireguard-keeper.ts   (the chart's <release>-peerops-wireguard DaemonSet)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, rmSync, watch, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** wireguard-go's UAPI socket directory, fixed when it is built; the chart shares the node's. */
const DIR = '/var/run/wireguard';
const REQUEST = '.want';
const NAME = /^[A-Za-z0-9_]{1,15}$/;
/** Interfaces whose wireguard-go runs, and requests that came while the one before was still exiting. */
const running = new Set<string>();
const queued = new Set<string>();
/** Every process this keeper runs (the host, wireguard-go daemons): told to stop when the keeper is. */
const children = new Set<ChildProcess>();
/** Set once the keeper is stopping: nothing is started or started again. */
let stopping = false;
/**
 * How long a stop waits for the children to close their tunnels, within the pod's 30 s grace: the
 * container's end kills what is left with SIGKILL, which leaves their UAPI sockets behind on the node.
 */
const STOP_WAIT_MS = 10_000;

function log(message: string): void {
  console.log(`${new Date().toISOString()} wireguard-keeper: ${message}`);
}

function start(name: string): void {
  if (running.has(name)) {
    // the link was deleted and asked for again before its old daemon's exit reached us
    queued.add(name);
    return;
  }
  const sock = join(DIR, `${name}.sock`);
  // a socket left by a daemon killed hard would make wireguard-go refuse to start
  rmSync(sock, { force: true });
  rmSync(join(DIR, `${name}.failed`), { force: true });
  const child = spawn('/usr/bin/wireguard-go', ['-f', name], {
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(name);
  children.add(child);
  let output = '';
  const collect = (d: Buffer) => {
    output = (output + d.toString()).slice(-4000);
    process.stdout.write(`${name}: ${d.toString()}`);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  // up once its UAPI socket exists; an exit before that is a failed start, answered to the shim
  let up = false;
  const watchUp = setInterval(() => {
    if (existsSync(sock)) {
      up = true;
      clearInterval(watchUp);
    }
  }, 100);
  log(`started wireguard-go for ${name} (pid ${child.pid})`);
  let done = false;
  const ended = (why: string) => {
    // 'error' (it never ran) and 'exit' may both come
    if (done) return;
    done = true;
    children.delete(child);
    clearInterval(watchUp);
    running.delete(name);
    if (!up) writeFileSync(join(DIR, `${name}.failed`), output || `${why}\n`);
    log(`wireguard-go for ${name} ended: ${why}`);
    if (queued.delete(name) && !stopping) start(name);
  };
  child.on('error', (err) => ended(err.message));
  child.on('exit', (code, signal) => ended(signal ? `signal ${signal}` : `exit ${code}`));
}

/** peerops-wireguard in the image; the keeper runs its host when it is there. */
const HOST_PROGRAM = '/usr/local/bin/peerops-wireguard';
/** The wait before a host that exited is started again: its tunnels are gone, the agent re-creates them. */
const HOST_RESTART_MS = 1000;

function hostInstalled(): boolean {
  try {
    accessSync(HOST_PROGRAM, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Runs `peerops-wireguard --serve`, its output as the keeper's, and starts it again whenever it exits. */
function serveHost(): void {
  const child = spawn(HOST_PROGRAM, ['--serve'], {
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.add(child);
  log(`started the peerops-wireguard host (pid ${child.pid})`);
  let restarted = false;
  const again = (why: string) => {
    children.delete(child);
    if (restarted || stopping) return;
    restarted = true;
    log(`the peerops-wireguard host ended (${why}); starting it again in ${HOST_RESTART_MS} ms`);
    setTimeout(serveHost, HOST_RESTART_MS);
  };
  child.on('error', (err) => again(err.message));
  child.on('exit', (code, signal) => again(signal ? `signal ${signal}` : `exit ${code}`));
}

/** Takes every pending request away and starts its daemon. */
function scan(): void {
  if (stopping) return;
  for (const file of readdirSync(DIR)) {
    if (!file.endsWith(REQUEST)) continue;
    const name = file.slice(0, -REQUEST.length);
    rmSync(join(DIR, file), { force: true });
    if (NAME.test(name)) start(name);
    else log(`ignored a request for '${name}': not an interface name`);
  }
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping; the tunnels of this keeper go down with it`);
    // the children close their tunnels and remove their UAPI sockets (the node's /var/run/wireguard)
    for (const child of children) child.kill('SIGTERM');
    const deadline = Date.now() + STOP_WAIT_MS;
    const check = setInterval(() => {
      if (children.size === 0 || Date.now() > deadline) {
        clearInterval(check);
        process.exit(0);
      }
    }, 50);
  });
}
if (hostInstalled()) serveHost();
log(`watching ${DIR}`);
scan();
// inotify for speed; the periodic scan covers a missed event
watch(DIR, () => scan());
setInterval(scan, 1000);
