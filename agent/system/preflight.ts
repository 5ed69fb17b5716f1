/**
 * What the agent needs from the router, checked once at start before anything else runs
 * (docs/agent.md, "What the agent needs"): the programs it runs, CAP_NET_ADMIN, write access to BIRD's
 * config root (it creates the include dirs there), BIRD's control socket, and ping's socket. Each unmet
 * need is one line that names the fix. Errors stop the agent with PREFLIGHT_EXIT; warnings leave it
 * running without what they name (no ping: no RTT; no sysctl: forwarding is not checked).
 */
import { constants } from 'node:fs';
import { access, readFile, stat, unlink, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { delimiter, dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ensureIncludeDirs } from '../bird/dirs.ts';
import { localConfDir } from '../bird/main-config.ts';
import type { AgentConfig } from '../config.ts';
import { detectBackend } from '../wireguard/interface.ts';
import { run } from './exec.ts';

/** Exit status of an agent whose preflight found an unmet need (sysexits' EX_CONFIG; docs/agent.md). */
export const PREFLIGHT_EXIT = 78;

export interface PreflightResult {
  /** One line each; any of them stops the agent. */
  errors: string[];
  /** One line each; the agent runs without what they name. */
  warnings: string[];
  /** Include dirs created on this start. */
  created: string[];
}

/** Each program the agent runs and the Debian package that has it. */
export const PROGRAMS = {
  ip: 'iproute2',
  bird: 'bird2',
  wg: 'wireguard-tools',
  'wireguard-go': 'wireguard-go',
  ping: 'iputils-ping',
  sysctl: 'procps',
  rm: 'coreutils',
  test: 'coreutils',
} as const;
type Program = keyof typeof PROGRAMS;

/** Programs without which the agent cannot set up a session (wireguard-go only without kernel WireGuard). */
const REQUIRED: Program[] = ['ip', 'bird', 'wg', 'rm', 'test'];

// Bits of /proc/self/status CapEff (linux/capability.h).
const CAP_NET_ADMIN = 12n;

/** Whether `name` is an executable file in a directory of PATH (what execvp would run). */
export async function onPath(name: string, path = process.env.PATH ?? ''): Promise<boolean> {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    try {
      const file = join(dir, name);
      if ((await stat(file)).isFile()) {
        await access(file, constants.X_OK);
        return true;
      }
    } catch {
      // not in this directory
    }
  }
  return false;
}

async function effectiveCapabilities(): Promise<bigint | undefined> {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(await readFile('/proc/self/status', 'utf8'));
    return m?.[1] ? BigInt(`0x${m[1]}`) : undefined;
  } catch {
    return undefined;
  }
}

const hasCap = (caps: bigint | undefined, bit: bigint) => caps === undefined || ((caps >> bit) & 1n) === 1n;

/**
 * `bird:bird 0750` of a path, with names from /etc/passwd and /etc/group where they have one; when the
 * path cannot be seen, its directory's (`in /run/bird bird:bird 0750`), which is then what refuses.
 */
async function ownerAndMode(path: string): Promise<string> {
  for (const [p, label] of [
    [path, ''],
    [dirname(path), `in ${dirname(path)} `],
  ] as const) {
    try {
      const s = await stat(p);
      const mode = (s.mode & 0o7777).toString(8).padStart(4, '0');
      return `${label}${await nameOf('/etc/passwd', s.uid)}:${await nameOf('/etc/group', s.gid)} ${mode}`;
    } catch {
      // not visible either: try the directory
    }
  }
  return 'owner unknown';
}

async function nameOf(file: string, id: number): Promise<string> {
  try {
    for (const line of (await readFile(file, 'utf8')).split('\n')) {
      const [name, , n] = line.split(':');
      if (name && Number(n) === id) return name;
    }
  } catch {
    // no such file: the number it is
  }
  return String(id);
}

/** Connects to the control socket and hangs up; answers the error code, or undefined when it answered. */
function probeSocket(path: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection(path);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('ETIMEDOUT');
    }, 5000);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(undefined);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code ?? err.message);
    });
  });
}

/** Prefix of the probe file a write check makes and removes at once. */
export const PROBE_PREFIX = '.peerops-preflight-';

/** Writes and removes a probe file in `dir`; answers the error code, or undefined when it could. */
async function probeWrite(dir: string): Promise<string | undefined> {
  const probe = join(dir, `${PROBE_PREFIX}${randomBytes(4).toString('hex')}`);
  try {
    await writeFile(probe, '', { flag: 'wx' });
    await unlink(probe);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  }
}

export async function preflight(
  config: Pick<AgentConfig, 'routing' | 'birdConfigRoot'>,
): Promise<PreflightResult> {
  const errors: string[] = [];
  const warnings: string[] = [];
  let created: string[] = [];
  const found = new Map<Program, boolean>();
  for (const p of Object.keys(PROGRAMS) as Program[]) found.set(p, await onPath(p));
  for (const p of REQUIRED) if (!found.get(p)) errors.push(`${p} not found on PATH: install ${PROGRAMS[p]}`);

  const caps = await effectiveCapabilities();
  const netAdmin = hasCap(caps, CAP_NET_ADMIN);
  if (!netAdmin)
    errors.push(
      'no CAP_NET_ADMIN: the agent creates network links; run it as root or grant AmbientCapabilities=CAP_NET_ADMIN',
    );
  // detectBackend says 'none' when the kernel has no WireGuard and no userspace implementation is on PATH
  else if (found.get('ip')) {
    const backend = await detectBackend().catch((err: Error) => err);
    if (backend instanceof Error) errors.push(backend.message);
    else if (backend === 'none')
      errors.push(
        'wireguard-go not found on PATH and the kernel has no WireGuard: install wireguard-go (or load the wireguard module)',
      );
  }

  const root = config.birdConfigRoot;
  const rootProblem = await probeWrite(root);
  if (rootProblem === 'ENOENT')
    errors.push(`BIRD's config dir ${root} does not exist: install bird2 (or set routing.peerConfDir)`);
  else if (rootProblem === 'EROFS')
    errors.push(`${root} is read-only to the agent: add it to the unit's ReadWritePaths=`);
  else if (rootProblem)
    errors.push(
      `cannot write in ${root} (${rootProblem}, ${await ownerAndMode(root)}): run the agent as root with CAP_DAC_OVERRIDE (the unit grants it), or make it group-writable (chmod g+w ${root}) with the agent in its group (SupplementaryGroups=bird)`,
    );
  else {
    const dirs = [config.routing.peerConfDir, config.routing.ibgpConfDir, localConfDir(config.routing)];
    try {
      created = await ensureIncludeDirs(dirs, root);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      errors.push(
        e.code === 'EPERM' && e.syscall === 'chown'
          ? `cannot give ${e.path ?? 'an include dir'} the group of ${root} (${await ownerAndMode(root)}): run the agent in that group (SupplementaryGroups=bird)`
          : `cannot create BIRD's include dirs in ${root}: ${e.message}`,
      );
    }
  }
  const socket = config.routing.controlSocket;
  const socketProblem = await probeSocket(socket);
  if (socketProblem === 'EACCES' || socketProblem === 'EPERM')
    errors.push(
      `cannot connect to BIRD's control socket ${socket} (permission denied, ${await ownerAndMode(socket)}): run the agent in BIRD's group (SupplementaryGroups=bird)`,
    );
  else if (socketProblem)
    warnings.push(
      `BIRD's control socket ${socket} does not answer (${socketProblem}): is bird running? The agent waits for it`,
    );

  if (!found.get('ping'))
    warnings.push('ping not found on PATH: install iputils-ping; until then no RTT is measured');
  else {
    const r = await run('ping', ['-6', '-n', '-c', '1', '-W', '1', '::1'], { timeoutMs: 5000 }).catch(
      (err: NodeJS.ErrnoException) => ({
        code: -1,
        stdout: '',
        stderr: `cannot execute ping: ${err.code ?? err.message}`,
      }),
    );
    const detail = r.stderr.trim().split('\n')[0];
    const gid = process.getgid?.() ?? 0;
    // Debian's ping carries the file capability cap_net_raw: a process whose bounding set lacks it may
    // not even execute it (EPERM from exec), and only CAP_NET_RAW mends that. A ping that runs but is
    // refused its socket also works with unprivileged ICMP for the agent's group.
    if (/EPERM|EACCES|exec of .* failed/.test(detail ?? ''))
      warnings.push(
        `ping is not permitted (${detail}): no RTT is measured; grant CAP_NET_RAW (AmbientCapabilities=CAP_NET_RAW)`,
      );
    else if (/operation not permitted|permission denied/i.test(r.stderr))
      warnings.push(
        `ping is not permitted (${detail}): no RTT is measured; grant CAP_NET_RAW (AmbientCapabilities=CAP_NET_RAW) or allow unprivileged ICMP: sysctl -w net.ipv4.ping_group_range="${gid} ${gid}"`,
      );
  }
  if (!found.get('sysctl'))
    warnings.push('sysctl not found on PATH: install procps; until then IP forwarding is not checked');
  return { errors, warnings, created };
}
