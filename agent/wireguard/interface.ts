/**
 * Makes the system match a WgInterfaceSpec (types.ts). The API that session and mesh code use:
 *
 *   ensureInterface(spec)   create or fix the interface; changes only what differs; resolves with what it did
 *   removeInterface(name)   delete the link (a wireguard-go daemon exits with it); false if there was none
 *   readInterface(name)     the actual state (read.ts), undefined if there is no such link
 *   readAllInterfaces(pfx)  the actual state of every link with one of the prefixes, in a few commands
 *   listInterfaces(prefix)  names of links starting with `prefix` (`wg_`, `wgm_`)
 *   detectBackend()         'kernel', 'peerops-wireguard' or 'wireguard-go', probed once
 *
 * State lives on the system, not in memory: the generation is stamped on the link's alias, keys and
 * peers are read back with `wg show dump`. An endpoint, MTU, address or peer change is applied in place;
 * a new generation (a session restart) or a link WireGuard does not answer for re-creates the link.
 * Without kernel WireGuard a tunnel is a userspace one: peerops-wireguard (wireguard-host/: one process
 * hosting every tunnel) when installed, else a wireguard-go daemon per tunnel. Both outlive an agent
 * restart, so established BGP sessions do not flap.
 */
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { constants, statSync } from 'node:fs';
import { access, mkdir, open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  canonicalIpv6,
  canonicalPrefix,
  formatEndpoint,
  isIpv4,
  isIpv6,
  parseEndpoint,
} from '../../common/net.ts';
import { run, runOk } from '../system/exec.ts';
import {
  generationAlias,
  listLinks,
  readAllInterfaces,
  readInterface,
  type WgInterfaceState,
} from './read.ts';
import type { EnsureResult, WgInterfaceSpec, WireGuard } from './types.ts';

/** wireguard-go's own directory (its UAPI sockets): root's, unlike /tmp, so nobody else names files in it. */
const WIREGUARD_RUN_DIR = '/var/run/wireguard';

export { readAllInterfaces, readInterface, type WgInterfaceState, type WgPeerState } from './read.ts';

/** The userspace implementations, preferred first: each is run as `<program> <ifname>`. */
const USERSPACE = ['peerops-wireguard', 'wireguard-go'] as const;
type Userspace = (typeof USERSPACE)[number];

/** `none`: the kernel has no WireGuard and no userspace implementation is on PATH. */
export type WgBackend = 'kernel' | Userspace | 'none';

/** The environment variable that names the backend instead of probing (docs/agent.md). */
export const BACKEND_ENV = 'PEEROPS_WIREGUARD';

export class WireGuardError extends Error {
  readonly interfaceName: string;
  constructor(interfaceName: string, message: string) {
    super(`${interfaceName}: ${message}`);
    this.name = 'WireGuardError';
    this.interfaceName = interfaceName;
  }
}

let backend: Promise<WgBackend> | undefined;

/**
 * Kernel WireGuard when `ip link add … type wireguard` works, else peerops-wireguard, else wireguard-go
 * (the first on PATH). PEEROPS_WIREGUARD=kernel|peerops-wireguard|wireguard-go names it instead (e.g.
 * userspace on a kernel that has WireGuard). Probed once per process.
 */
export function detectBackend(): Promise<WgBackend> {
  backend ??= (async () => {
    const wanted = process.env[BACKEND_ENV];
    if (wanted) {
      if (wanted === 'kernel') return 'kernel';
      const chosen = USERSPACE.find((u) => u === wanted);
      if (!chosen)
        throw new Error(
          `${BACKEND_ENV}=${wanted}: not a WireGuard backend; use kernel, ${USERSPACE.join(' or ')}`,
        );
      return (await installed(chosen)) ? chosen : 'none';
    }
    const probe = `wgprobe${process.pid % 100000}`;
    const r = await run('ip', ['link', 'add', probe, 'type', 'wireguard']);
    if (r.code === 0) {
      await run('ip', ['link', 'del', probe]);
      return 'kernel';
    }
    for (const program of USERSPACE) if (await installed(program)) return program;
    return 'none';
  })();
  return backend;
}

async function installed(program: Userspace): Promise<boolean> {
  return run(program, ['--version']).then(
    // inside a test's namespace `ip netns exec` says it could not exec the program
    (r) => !(r.code !== 0 && /exec of .* failed: No such file/.test(r.stderr)),
    () => false, // spawn ENOENT: not on PATH
  );
}

export async function listInterfaces(prefix: string): Promise<string[]> {
  return listLinks(prefix);
}

export async function removeInterface(name: string): Promise<boolean> {
  checkName(name);
  const r = await run('ip', ['link', 'del', 'dev', name]);
  if (r.code === 0) {
    await waitForSocketGone(name);
    await rm(wireguardGoLog(name), { force: true });
    return true;
  }
  if (/cannot find device|does not exist/i.test(r.stderr)) return false;
  throw new WireGuardError(name, `removing the link failed: ${r.stderr.trim()}`);
}

/**
 * Public keys already derived, by key file and the file's identity (inode, size, mtime): every session
 * of a pass uses the same key file, and a changed file is read again.
 */
const derived = new Map<string, { identity: string; publicKey: string }>();

/** The public key of a private key file (X25519), after checking that only its owner can read it. */
export async function publicKeyOfPrivateKeyFile(path: string, ifname = 'wireguard'): Promise<string> {
  let st;
  try {
    // synchronous: every tunnel of a pass asks, and one syscall is cheaper than a trip to the thread pool
    st = statSync(path);
  } catch (err) {
    throw new WireGuardError(ifname, `private key ${path}: ${(err as Error).message}`);
  }
  if (st.mode & 0o077) {
    throw new WireGuardError(
      ifname,
      `private key ${path} has mode ${(st.mode & 0o777).toString(8)}; it must not be readable by group or others (chmod 600)`,
    );
  }
  const identity = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  const known = derived.get(path);
  if (known?.identity === identity) return known.publicKey;
  const publicKey = await derivePublicKey(path, ifname);
  derived.set(path, { identity, publicKey });
  return publicKey;
}

async function derivePublicKey(path: string, ifname: string): Promise<string> {
  const raw = Buffer.from((await readFile(path, 'utf8')).trim(), 'base64');
  if (raw.length !== 32)
    throw new WireGuardError(ifname, `private key ${path} is not a base64 WireGuard key`);
  const der = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), raw]);
  const jwk = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({
    format: 'jwk',
  });
  return Buffer.from(jwk.x ?? '', 'base64url').toString('base64');
}

/**
 * `known`: the state already read for this pass (readAllInterfaces; null = no such link), so a pass
 * over many interfaces does not read each one again.
 */
export async function ensureInterface(
  spec: WgInterfaceSpec,
  known?: WgInterfaceState | null,
): Promise<EnsureResult> {
  checkName(spec.name);
  const publicKey = await publicKeyOfPrivateKeyFile(spec.privateKeyPath, spec.name);
  const changes: string[] = [];
  let actual = known === undefined ? await readInterface(spec.name) : (known ?? undefined);
  const stampOnly = spec.adopted && actual?.generation === undefined;
  if (actual && ((actual.generation !== spec.generation && !stampOnly) || actual.wg === undefined)) {
    await removeInterface(spec.name);
    changes.push(
      actual.wg === undefined ? 'removed a link WireGuard did not answer for' : 'new generation: re-created',
    );
    actual = undefined;
  }
  let created = false;
  if (!actual) {
    // peerops-wireguard takes the keys, port and peer with the request that creates the link: one
    // program run less per tunnel. Nothing to read back from a link just made: it has what it was given.
    const preset =
      (await detectBackend()) === 'peerops-wireguard' ? await presetSettings(spec, publicKey) : undefined;
    await createLink(spec.name, preset?.uapi);
    created = true;
    changes.push(preset ? 'created with its keys, port and peer' : 'created');
    actual = { ...newLinkState(spec.name), ...(preset ? { wg: preset.wg } : {}) };
  }
  // ip(8) changes go in one `ip -batch` run after `wg set`, in the order a link needs them (addrgenmode
  // before up, addresses before routes): one process per tunnel instead of one per change.
  const ipSteps: { what: string; line: string }[] = [];
  // ip's batch lines split at spaces: an argument with one (the alias) is quoted
  const ip = (what: string, args: string[]) =>
    ipSteps.push({ what, line: args.map((a) => (/\s/.test(a) ? `"${a}"` : a)).join(' ') });

  // a hand-made link runs as it was made; one the agent makes anew (after a reboot) has none of its own
  if (!actual.addrGenModeNone && !(spec.adopted && !created))
    ip('addrgenmode none', ['link', 'set', 'dev', spec.name, 'addrgenmode', 'none']);
  if (actual.mtu !== spec.mtu)
    ip(`mtu ${spec.mtu}`, ['link', 'set', 'dev', spec.name, 'mtu', String(spec.mtu)]);

  const wg = actual.wg;
  const wgArgs: string[] = [];
  if (!wg || wg.publicKey !== publicKey) wgArgs.push('private-key', spec.privateKeyPath);
  if (!wg || wg.listenPort !== spec.listenPort) wgArgs.push('listen-port', String(spec.listenPort));
  for (const peer of wg?.peers ?? [])
    if (peer.publicKey !== spec.peer.publicKey) wgArgs.push('peer', peer.publicKey, 'remove');
  const current = wg?.peers.find((p) => p.publicKey === spec.peer.publicKey);
  const wantAllowed = spec.peer.allowedIps.map(canonicalAllowedIp).sort();
  const peerArgs: string[] = [];
  if (spec.peer.endpoint && (await endpointDiffers(spec.peer.endpoint, current?.endpoint))) {
    peerArgs.push('endpoint', spec.peer.endpoint);
  }
  if (!current || current.allowedIps.map(canonicalAllowedIp).sort().join(',') !== wantAllowed.join(',')) {
    peerArgs.push('allowed-ips', wantAllowed.join(','));
  }
  // A new link's keepalive is set once the link is up with its addresses: WireGuard then sends one at
  // once, and the handshake it starts lets through what the peer held for us (its BGP connection
  // attempt). Set before, it fires as the link comes up, while the kernel may not have the addresses
  // ready: the peer's SYN would be answered "unreachable" and its BGP connect fail.
  const keepaliveAfterUp = created && spec.peer.persistentKeepalive > 0;
  if (!keepaliveAfterUp && (!current || current.persistentKeepalive !== spec.peer.persistentKeepalive)) {
    peerArgs.push(
      'persistent-keepalive',
      spec.peer.persistentKeepalive ? String(spec.peer.persistentKeepalive) : 'off',
    );
  }
  if (peerArgs.length) wgArgs.push('peer', spec.peer.publicKey, ...peerArgs);
  if (wgArgs.length) {
    const what = `wg set ${wgArgs.map((a) => (a === spec.privateKeyPath ? '<key file>' : a)).join(' ')}`;
    const r = await run('wg', ['set', spec.name, ...wgArgs]);
    if (r.code !== 0) {
      // a daemon that died after it started (e.g. `too many open files`: docs/agent.md) says why in its log
      const daemon = created ? await daemonLogTail(spec.name) : '';
      throw new WireGuardError(
        spec.name,
        `${what} failed: ${(r.stderr || r.stdout).trim()}${daemon ? ` (wireguard-go: ${daemon})` : ''}`,
      );
    }
    changes.push(what);
  }

  const want = new Map(spec.addresses.map((a) => [canonicalAddress(a), a]));
  const have = new Set(actual.addresses.map(canonicalAddress));
  for (const addr of have) {
    if (!want.has(addr)) ip(`del address ${addr}`, ['addr', 'del', ...addr.split(' '), 'dev', spec.name]);
  }
  for (const [key, addr] of want) {
    if (!have.has(key)) {
      const v6 = addr.includes(':');
      ip(`add address ${key}`, [
        'addr',
        'add',
        ...addr.split(' '),
        'dev',
        spec.name,
        ...(v6 ? ['nodad'] : []),
      ]);
    }
  }
  if (spec.multicast && !actual.multicast)
    ip('multicast on', ['link', 'set', 'dev', spec.name, 'multicast', 'on']);
  if (!actual.up) ip('up', ['link', 'set', 'dev', spec.name, 'up']);
  const haveRoutes = new Set(actual.routes.map(canonicalRoute));
  for (const route of spec.peerRoutes) {
    if (!haveRoutes.has(canonicalRoute(route)))
      ip(`route ${route}`, ['route', 'replace', route, 'dev', spec.name]);
  }
  // a peer address changed by a modify: its old route would keep pulling that address into this tunnel
  const wantRoutes = new Set(spec.peerRoutes.map(canonicalRoute));
  for (const route of actual.ownRoutes)
    if (!wantRoutes.has(canonicalRoute(route)))
      ip(`del route ${route}`, ['route', 'del', route, 'dev', spec.name]);
  if (actual.generation !== spec.generation) {
    ip(`generation ${spec.generation}`, [
      'link',
      'set',
      'dev',
      spec.name,
      'alias',
      generationAlias(spec.generation),
    ]);
  }
  await ipBatch(spec.name, ipSteps);
  changes.push(...ipSteps.map((s) => s.what));
  if (keepaliveAfterUp) {
    const keepalive = String(spec.peer.persistentKeepalive);
    const r = await run('wg', [
      'set',
      spec.name,
      'peer',
      spec.peer.publicKey,
      'persistent-keepalive',
      keepalive,
    ]);
    const what = `wg set peer ${spec.peer.publicKey} persistent-keepalive ${keepalive}`;
    if (r.code !== 0) throw new WireGuardError(spec.name, `${what} failed: ${(r.stderr || r.stdout).trim()}`);
    changes.push(what);
  }
  return { created, changes };
}

/**
 * Runs ip(8) commands as one `ip -batch -`. ip stops at the first command that fails and names its line
 * (`Command failed -:<n>`): the error names that change, as running each command alone would.
 */
async function ipBatch(name: string, steps: readonly { what: string; line: string }[]): Promise<void> {
  if (steps.length === 0) return;
  const r = await run('ip', ['-batch', '-'], { input: steps.map((s) => `${s.line}\n`).join('') });
  if (r.code === 0) return;
  const output = (r.stderr || r.stdout).trim();
  const line = Number(/Command failed -:(\d+)/.exec(output)?.[1] ?? 0);
  const what = steps[line - 1]?.what ?? steps.map((s) => s.what).join(', ');
  const message = output.replace(/\n?Command failed -:\d+\s*$/, '').trim();
  throw new WireGuardError(name, `${what} failed: ${message}`);
}

/** Linux's rules for an interface name, as hand-made links (`dn42-foo`) use them; never an option's leading `-`. */
function checkName(name: string): void {
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$/.test(name))
    throw new WireGuardError(name, 'not a valid interface name');
}

/**
 * The settings a new peerops-wireguard tunnel is created with, as UAPI `set` lines (keys in hex), and the
 * WireGuard state they make. Not the keepalive (set once the link is up: ensureInterface says why), nor an
 * endpoint given by host name (`wg set` resolves it).
 */
async function presetSettings(
  spec: WgInterfaceSpec,
  publicKey: string,
): Promise<{ uapi: string; wg: NonNullable<WgInterfaceState['wg']> }> {
  const hex = (base64: string) => Buffer.from(base64, 'base64').toString('hex');
  const privateKey = (await readFile(spec.privateKeyPath, 'utf8')).trim();
  const endpoint = spec.peer.endpoint ? addressEndpoint(spec.peer.endpoint) : '';
  const allowedIps = spec.peer.allowedIps.map(canonicalAllowedIp);
  const uapi = [
    `private_key=${hex(privateKey)}`,
    `listen_port=${spec.listenPort}`,
    `public_key=${hex(spec.peer.publicKey)}`,
    ...(endpoint ? [`endpoint=${endpoint}`] : []),
    'replace_allowed_ips=true',
    ...allowedIps.map((prefix) => `allowed_ip=${prefix}`),
  ];
  const peer = {
    publicKey: spec.peer.publicKey,
    endpoint: endpoint || undefined,
    allowedIps,
    latestHandshake: 0,
    rxBytes: 0,
    txBytes: 0,
    persistentKeepalive: 0,
  };
  return { uapi: `${uapi.join('\n')}\n`, wg: { publicKey, listenPort: spec.listenPort, peers: [peer] } };
}

/** Creates the link; `settings` (UAPI `set` lines) only for peerops-wireguard. */
async function createLink(name: string, settings?: string): Promise<void> {
  const backend = await detectBackend();
  if (backend === 'kernel') {
    await runOk('ip', ['link', 'add', 'dev', name, 'type', 'wireguard']);
    return;
  }
  if (backend === 'none')
    throw new WireGuardError(
      name,
      'no WireGuard: the kernel has none and neither peerops-wireguard nor wireguard-go is on PATH (install wireguard-go)',
    );
  if (backend === 'peerops-wireguard') {
    // The command returns once the host carries the link and its UAPI socket answers; the host (started
    // detached by the first such command) writes its own log, so the command's output can be a pipe.
    const r =
      settings === undefined
        ? await run('peerops-wireguard', [name], { timeoutMs: 30_000 })
        : await run('peerops-wireguard', ['--configured', name], { timeoutMs: 30_000, input: settings });
    if (r.code !== 0)
      throw new WireGuardError(name, `peerops-wireguard failed (exit ${r.code}): ${r.stderr.trim()}`);
    return;
  }
  // A stale UAPI socket from a daemon killed hard would make wireguard-go refuse to start.
  await rm(`${WIREGUARD_RUN_DIR}/${name}.sock`, { force: true });
  // The daemon's log goes to a file: it keeps writing after the command returns (a pipe would break it).
  const logPath = wireguardGoLog(name);
  await mkdir(WIREGUARD_RUN_DIR, { recursive: true, mode: 0o755 });
  // never through a link someone placed there
  const log = await open(
    logPath,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
    0o600,
  );
  let r;
  try {
    r = await run('wireguard-go', [name], {
      timeoutMs: 15_000,
      outputFd: log.fd,
      env: { LOG_LEVEL: 'error', GOMAXPROCS: wireguardGoMaxProcs() },
    });
  } finally {
    await log.close();
  }
  if (r.code !== 0) {
    const text = await readFile(logPath, 'utf8').catch(() => '');
    throw new WireGuardError(name, `wireguard-go failed (exit ${r.code}): ${text.trim().slice(-1000)}`);
  }
  // wireguard-go opens its UAPI socket before the command returns (the daemon inherits it, and the
  // keeper's shim waits for it): `wg set` can talk to it at once, no wait here.
}

/**
 * Go's scheduler slots (GOMAXPROCS) for each daemon: 1 unless the agent's environment sets GOMAXPROCS. A
 * daemon carries one tunnel; with one slot it takes less memory and a thread less, which adds up at
 * hundreds of tunnels (docs/agent.md, "What wireguard-go costs").
 */
function wireguardGoMaxProcs(): string {
  return process.env.GOMAXPROCS || '1';
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

/** The state of a link just created: down, default MTU and address generation, no address, route or key. */
function newLinkState(name: string): WgInterfaceState {
  return {
    name,
    kind: 'new',
    mtu: 0,
    up: false,
    multicast: false,
    addrGenModeNone: false,
    addresses: [],
    routes: [],
    ownRoutes: [],
    generation: undefined,
    wg: { publicKey: '', listenPort: 0, peers: [] },
  };
}

function wireguardGoLog(name: string): string {
  return join(WIREGUARD_RUN_DIR, `${name}.peerops.log`);
}

/** The end of a wireguard-go daemon's log ('' when there is none). */
async function daemonLogTail(name: string): Promise<string> {
  const text = await readFile(wireguardGoLog(name), 'utf8').catch(() => '');
  return text.trim().slice(-1000);
}

async function waitForSocketGone(name: string): Promise<void> {
  if ((await detectBackend()) === 'kernel') return;
  const deadline = Date.now() + 3000;
  while ((await exists(`${WIREGUARD_RUN_DIR}/${name}.sock`)) && Date.now() < deadline) {
    await new Promise((res) => setTimeout(res, 50));
  }
}

/**
 * The spellings worked out so far, by kind and text. A pass compares the same strings every time (each
 * tunnel's addresses, routes and allowed IPs, wanted and read back), and parsing them again with
 * ipaddr.js was a fifth of the agent's CPU in a no-op pass at 1,000 tunnels. Emptied when it grows past
 * any router's count, so addresses of sessions long gone do not pile up.
 */
const spellings = new Map<string, string>();
function remembered(kind: string, value: string, spell: (v: string) => string): string {
  const key = `${kind} ${value}`;
  let known = spellings.get(key);
  if (known === undefined) {
    if (spellings.size >= 100_000) spellings.clear();
    known = spell(value);
    spellings.set(key, known);
  }
  return known;
}

const canonicalAllowedIp = (value: string) => remembered('prefix', value, canonicalPrefix);

function canonicalAddress(value: string): string {
  return remembered('address', value, (v) => {
    const [local, remote] = v.split(' peer ');
    if (remote !== undefined) return `${local} peer ${canonicalAddress(remote)}`;
    const [addr = '', len] = v.split('/');
    return `${isIpv6(addr) ? canonicalIpv6(addr) : addr}/${len ?? (isIpv6(addr) ? '128' : '32')}`;
  });
}

function canonicalRoute(value: string): string {
  return remembered('route', value, (v) => {
    const [addr = '', len] = v.split('/');
    if (len === undefined || (isIpv4(addr) && len === '32') || (isIpv6(addr) && len === '128')) {
      return isIpv6(addr) ? canonicalIpv6(addr) : addr;
    }
    return canonicalPrefix(v);
  });
}

/** An endpoint as `address:port` in one spelling; '' when its host is a name (or it is no endpoint). */
const addressEndpoint = (value: string) =>
  remembered('endpoint', value, (v) => {
    const parsed = parseEndpoint(v);
    return parsed && (isIpv4(parsed.host) || isIpv6(parsed.host)) ? formatEndpoint(parsed) : '';
  });

/** Does WireGuard's resolved endpoint differ from the wanted one? Names are resolved to compare. */
async function endpointDiffers(wanted: string, actual: string | undefined): Promise<boolean> {
  const have = actual === undefined ? '' : addressEndpoint(actual);
  if (!have) return true;
  const want = addressEndpoint(wanted);
  if (want) return want !== have;
  const parsed = parseEndpoint(wanted);
  if (!parsed) return true;
  try {
    return formatEndpoint({ host: (await lookup(parsed.host)).address, port: parsed.port }) !== have;
  } catch {
    return true;
  }
}

export type { EnsureResult, WgInterfaceSpec, WireGuard } from './types.ts';

/** The system's WireGuard: links and `wg` through ip(8) and wg(8), wireguard-go where the kernel has none. */
export const systemWireGuard: WireGuard = {
  readAll: async (prefixes) =>
    readAllInterfaces(prefixes, { hostDump: (await detectBackend()) === 'peerops-wireguard' }),
  ensure: (spec, known) => ensureInterface(spec, known),
  remove: (name) => removeInterface(name),
};
