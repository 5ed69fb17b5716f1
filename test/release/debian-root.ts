/**
 * A Debian 13 (trixie) root file system for the .deb test, made by mmdebstrap from Debian's packages
 * (minbase and the given ones) and cached as a tarball under ~/.cache/peerops, keyed by suite, mirror
 * and package list, so that only the first run on a machine (2 to 3.5 min on 2 busy cores) pays for it.
 * And the way to run a systemd service's ExecStart as the unit says (User, groups, capabilities,
 * NoNewPrivileges, UMask) where systemd does not run: setpriv inside the chroot.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const SUITE = 'trixie';
const MIRROR = 'http://deb.debian.org/debian';
/** What the .deb depends on and what the tests themselves run in the chroot (setpriv: util-linux, essential). */
export const DEB_ROOT_PACKAGES = [
  'bird2',
  'wireguard-tools',
  'wireguard-go',
  'iproute2',
  'iputils-ping',
  'procps',
  'nodejs',
  'adduser',
  'ca-certificates',
  'curl',
];

/** The cached tarball of a minbase root with `packages`, made now when missing. */
export async function debianRootfs(
  packages: readonly string[],
  log: (line: string) => void,
): Promise<string> {
  const list = [...packages].sort();
  const key = createHash('sha256')
    .update(JSON.stringify({ SUITE, MIRROR, variant: 'minbase', list }))
    .digest('hex')
    .slice(0, 16);
  const dir = path.join(homedir(), '.cache', 'peerops');
  const tar = path.join(dir, `debian-${SUITE}-${key}.tar`);
  if (existsSync(tar)) {
    log(`Debian root: cached ${tar}`);
    return tar;
  }
  await mkdir(dir, { recursive: true });
  const tmp = path.join(dir, `.${process.pid}-${path.basename(tar)}`); // mmdebstrap: .tar → a tarball
  const t0 = performance.now();
  try {
    await run(
      'mmdebstrap',
      ['--variant=minbase', `--include=${list.join(',')}`, '--quiet', SUITE, tmp, MIRROR],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    await rename(tmp, tar);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  log(
    `Debian root: mmdebstrap ${SUITE} with ${list.join(' ')}: ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  return tar;
}

/**
 * The [Service] settings of a unit and its drop-ins as systemd reads them: later files win, and for
 * list settings (AmbientCapabilities, CapabilityBoundingSet, SupplementaryGroups) every line adds and
 * an empty one resets.
 */
export async function serviceSettings(files: readonly string[]): Promise<Map<string, string[]>> {
  const settings = new Map<string, string[]>();
  for (const file of files) {
    let section = '';
    for (const raw of (await readFile(file, 'utf8')).split('\n')) {
      const line = raw.trim();
      if (!line || line.startsWith('#') || line.startsWith(';')) continue;
      const header = /^\[(.+)\]$/.exec(line);
      if (header) {
        section = header[1] ?? '';
        continue;
      }
      const eq = line.indexOf('=');
      if (section !== 'Service' || eq < 0) continue;
      const name = line.slice(0, eq).trim();
      const value = line.slice(eq + 1).trim();
      settings.set(name, value === '' ? [] : [...(settings.get(name) ?? []), value]);
    }
  }
  return settings;
}

/** `CAP_NET_ADMIN CAP_NET_RAW` lines → setpriv's `net_admin,net_raw`. */
function caps(values: readonly string[] | undefined): string {
  return (values ?? [])
    .flatMap((v) => v.split(/\s+/))
    .filter(Boolean)
    .map((c) => `+${c.toLowerCase().replace(/^cap_/, '')}`)
    .join(',');
}

/**
 * The argv (run inside the chroot) that starts the unit's ExecStart as systemd would: the unit's User
 * and Group, the user's groups plus SupplementaryGroups, ambient and bounding capabilities, no new
 * privileges, the unit's UMask and systemd's PATH. What a chroot cannot give (ProtectSystem,
 * ReadWritePaths, restarts) is left out.
 */
export function execStartArgv(settings: Map<string, string[]>, userGroups: readonly string[]): string[] {
  const last = (name: string) => settings.get(name)?.at(-1);
  const user = last('User');
  const execStart = last('ExecStart');
  if (!user || !execStart) throw new Error('the unit names no User or no ExecStart');
  const groups = new Set([
    ...userGroups,
    ...(settings.get('SupplementaryGroups') ?? []).flatMap((g) => g.split(/\s+/)),
  ]);
  const ambient = caps(settings.get('AmbientCapabilities'));
  const bounding = caps(settings.get('CapabilityBoundingSet'));
  const setpriv = [
    'setpriv',
    `--reuid=${user}`,
    `--regid=${last('Group') ?? user}`,
    `--groups=${[...groups].join(',')}`,
    `--inh-caps=-all${ambient ? `,${ambient}` : ''}`,
    `--ambient-caps=-all${ambient ? `,${ambient}` : ''}`,
    `--bounding-set=-all${bounding ? `,${bounding}` : ''}`,
    ...(last('NoNewPrivileges') === 'yes' ? ['--no-new-privs'] : []),
    '--',
  ];
  const env = [
    'env',
    '-i',
    'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin',
    `USER=${user}`,
    `LOGNAME=${user}`,
    'HOME=/nonexistent',
  ];
  // systemd runs ExecStart's program from its search path; the rest are plain words here
  const umask = last('UMask') ?? '0022';
  return [
    'sh',
    '-c',
    `umask ${umask} && exec "$@"`,
    'execstart',
    ...setpriv,
    ...env,
    ...execStart.split(/\s+/),
  ];
}

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/**
 * A shell script, for a fresh mount namespace inside the test's network namespace, that boots `root` as
 * far as the agent needs: /proc, /dev, /sys, an empty /run; BIRD started as Debian's bird.service starts
 * it (its pid written to `birdPidFile`, outside the root); then `argv` (execStartArgv) run in the root.
 */
export function bootScript(root: string, birdPidFile: string, argv: readonly string[]): string {
  return [
    'set -e',
    `R=${quote(root)}`,
    'mount -t proc proc "$R/proc"',
    'mount --rbind /dev "$R/dev"',
    'mount -t sysfs sysfs "$R/sys"',
    'mount -t tmpfs -o mode=755 tmpfs "$R/run"',
    'chroot "$R" /usr/lib/bird/prepare-environment',
    'chroot "$R" /usr/sbin/bird -f -u bird -g bird -c /etc/bird/bird.conf -s /run/bird/bird.ctl &',
    `echo $! > ${quote(birdPidFile)}`,
    'i=0; while [ ! -S "$R/run/bird/bird.ctl" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done',
    `exec chroot "$R" ${argv.map(quote).join(' ')}`,
  ].join('\n');
}
