/**
 * `peerops session config --out DIR` (docs/cli.md): the peer's files written where the daemon that reads
 * them can. BIRD, systemd-networkd and FRR run as users of their own (Debian: `bird`, `systemd-network`,
 * `frr`), so their files are mode 640 in that group where the group exists; the wg-quick file, which will
 * hold the private key and is read by root, stays 600. A file that is there already keeps its mode and
 * group: an operator who set them chose them. Each file says what was done, in words.
 */
import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { atomicWriteFile } from '../common/atomic-write.ts';
import type { PeerConfigFormat } from '../common/peer-config/formats.ts';
import { CliError } from './client.ts';

const run = promisify(execFile);

interface Reader {
  daemon: string;
  group: string;
}

/** The daemon that reads each format's files, and its group; wg-quick's file is root's alone. */
const READER: Record<PeerConfigFormat, Reader | undefined> = {
  'wg-quick': undefined,
  networkd: { daemon: 'systemd-networkd', group: 'systemd-network' },
  bird: { daemon: 'BIRD', group: 'bird' },
  frr: { daemon: 'FRR', group: 'frr' },
};

export interface WrittenFile {
  path: string;
  /** What was done, in words: `mode 640, group bird: BIRD can read it`. */
  note: string;
}

/** A group's id, through NSS (`getent`, so LDAP groups count too); undefined where there is none. */
async function groupId(name: string): Promise<number | undefined> {
  try {
    const { stdout } = await run('getent', ['group', name]);
    const gid = Number(stdout.split(':')[2]);
    return Number.isInteger(gid) ? gid : undefined;
  } catch {
    return undefined;
  }
}

const octal = (mode: number): string => (mode & 0o777).toString(8);

/** Writes one file for `reader` (group id `gid`, where the group exists); says what was done. */
async function place(
  path: string,
  content: string,
  reader: Reader | undefined,
  gid: number | undefined,
): Promise<string> {
  const before = await stat(path).catch(() => undefined);
  if (before) {
    await atomicWriteFile(path, content, { mode: before.mode & 0o7777 });
    // the replacement is this user's: given back the owner and group the file had (root can always)
    const kept = await chown(path, before.uid, before.gid).then(
      () => true,
      () => false,
    );
    return kept
      ? `kept its mode ${octal(before.mode)} and owner`
      : `kept its mode ${octal(before.mode)}; its owner could not be kept (run as root)`;
  }
  // written 600, and group-readable only once it is the group's
  await atomicWriteFile(path, content, { mode: 0o600 });
  if (reader === undefined) return 'mode 600: it will hold your private key';
  if (gid === undefined)
    return `mode 600: there is no group ${reader.group} here; make it readable by the user ${reader.daemon} runs as`;
  const refused = await chown(path, -1, gid).then(
    () => undefined,
    (err: NodeJS.ErrnoException) => err.code ?? String(err),
  );
  if (refused !== undefined)
    return `mode 600: it could not be given to group ${reader.group} (${refused}); as root: chgrp ${reader.group} ${path} && chmod 640 ${path}`;
  await chmod(path, 0o640);
  return `mode 640, group ${reader.group}: ${reader.daemon} can read it`;
}

/** Writes the files into `dir` (each replaced atomically), each readable by the daemon that reads it. */
export async function writeConfigFiles(
  dir: string,
  format: PeerConfigFormat,
  files: { name: string; content: string }[],
): Promise<WrittenFile[]> {
  await mkdir(dir, { recursive: true });
  const reader = READER[format];
  const gid = reader === undefined ? undefined : await groupId(reader.group);
  const written: WrittenFile[] = [];
  for (const file of files) {
    // the controller names the files; a name is never a path
    if (!/^[A-Za-z0-9_=+.-]+$/.test(file.name) || file.name.startsWith('.'))
      throw new CliError('INVALID_ANSWER', `the controller answered an unusable file name: ${file.name}`);
    const path = join(dir, file.name);
    written.push({ path, note: await place(path, file.content, reader, gid) });
  }
  return written;
}
