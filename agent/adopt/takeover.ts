/**
 * The takeover of adopted sessions (docs/agent.md, Adopting a running router). What the agent keeps of
 * it lives in `<tunnel.configDir>/peerops-adopted/` (0700): `record.json` and, for a hand-made tunnel
 * whose private key is not the router's, `<interface>.key` (0600). The record holds, per adopted link,
 * the hand-made protocols' options, the link's addresses, routes and key file the agent renders from
 * then on, and every hand-made file set aside (`<file>.peerops-adopted`), which `peerops adopt --undo`
 * (undo.ts) puts back, and the text of `peerops-not-adopted.conf` (remainder.ts): what those files
 * define besides the adopted protocols, which the agent writes in the same swap. The record is written
 * before any file is moved, so an agent killed in between leaves nothing undo cannot put back.
 */
import { chmod, mkdir, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import type { AgentSession } from '../../common/agent-api.ts';
import { atomicWriteFile } from '../../common/atomic-write.ts';
import { readTextIfExists } from '../../common/read-file.ts';
import { peerFileName } from '../bird/peer-config.ts';
import { run } from '../system/exec.ts';
import { publicKeyOfPrivateKeyFile, readAllInterfaces } from '../wireguard/interface.ts';
import { keepProtocol, type KeptProtocol } from './kept-protocol.ts';
import { localConfDir } from '../bird/main-config.ts';
import { AGENT_FILE_HEAD, readBirdTree, type BirdFile } from './read-files.ts';
import { renderRemainder } from './remainder.ts';

/** A session's `adopted` block (docs/api.md), which the controller sends with the session. */
export type Adopted = NonNullable<AgentSession['adopted']>;

/** What the agent renders an adopted link and its protocols from, as the takeover found them. */
export interface AdoptedLink {
  interface: string;
  protocols: KeptProtocol[];
  addresses: string[];
  routes: string[];
  /** The hand-made tunnel's own private key, kept here when it is not the router's. */
  keyFile?: string;
  /** The agent's BIRD file for the session in peerConfDir, which `--undo` removes. */
  peerFile: string;
}

export interface SetAside {
  from: string;
  to: string;
}

export interface AdoptionRecord {
  links: AdoptedLink[];
  setAside: SetAside[];
  /** The text of peerConfDir's `peerops-not-adopted.conf`, while the set-aside files define more. */
  remainder?: string;
}

export const SET_ASIDE_SUFFIX = '.peerops-adopted';
const RECORD = 'record.json';

export function adoptionDir(tunnelConfigDir: string): string {
  return join(tunnelConfigDir, 'peerops-adopted');
}

export async function loadRecord(dir: string): Promise<AdoptionRecord> {
  const text = await readTextIfExists(join(dir, RECORD));
  return text === undefined ? { links: [], setAside: [] } : (JSON.parse(text) as AdoptionRecord);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

export class Adoption {
  readonly dir: string;
  private readonly mainPath: string;
  private readonly routerKeyPath: string;
  /** The agent's file of the protocols left running (remainder.ts): never set aside. */
  private readonly remainderPath: string;
  private record: AdoptionRecord | undefined;

  constructor(opts: { dir: string; mainPath: string; routerKeyPath: string; remainderPath: string }) {
    this.dir = opts.dir;
    this.mainPath = opts.mainPath;
    this.routerKeyPath = opts.routerKeyPath;
    this.remainderPath = opts.remainderPath;
  }

  private async current(): Promise<AdoptionRecord> {
    this.record ??= await loadRecord(this.dir);
    return this.record;
  }

  /** The adopted link of that name, once taken over. */
  async link(name: string): Promise<AdoptedLink | undefined> {
    return (await this.current()).links.find((l) => l.interface === name);
  }

  /** Names of every link taken over: the agent's own, as its `wg_<port>` links are. */
  async linkNames(): Promise<string[]> {
    return (await this.current()).links.map((l) => l.interface);
  }

  /** The text of the agent's file of the hand-made protocols no session adopted, while there are some. */
  async remainder(): Promise<string | undefined> {
    return (await this.current()).remainder;
  }

  /** Hand-made files recorded but not yet set aside: the next BIRD apply moves them (bird/apply.ts). */
  async pendingSetAside(): Promise<SetAside[]> {
    const pending: SetAside[] = [];
    for (const m of (await this.current()).setAside)
      if ((await exists(m.from)) && !(await exists(m.to))) pending.push(m);
    return pending;
  }

  /**
   * Reads what each adopted session not yet taken over keeps (its protocols from the hand-made BIRD
   * tree, its link's addresses, routes and key) and records the hand-made files to set aside, and what
   * those define besides the adopted protocols (remainder.ts; `mainNames`: the names peerops's main
   * file defines). Answers uuid → why a session could not be taken over; the others are in the record,
   * written durably.
   */
  async takeOver(
    sessions: readonly AgentSession[],
    mainNames: ReadonlySet<string>,
  ): Promise<Map<string, string>> {
    const record = await this.current();
    const failed = new Map<string, string>();
    const todo = sessions.filter((s) => {
      const a = s.adopted;
      return a && !record.links.some((l) => l.interface === a.interface);
    });
    if (todo.length === 0) return failed;
    const handMain = await this.handMadeMain();
    const tree = await this.handMadeTree(handMain);
    const routerKey = await publicKeyOfPrivateKeyFile(this.routerKeyPath);
    // every hand-made link in one read (a few commands), not five commands a link
    const names = todo.map((s) => s.adopted!.interface);
    const live = await readAllInterfaces(names);
    const moves: SetAside[] = [];
    for (const s of todo) {
      const a = s.adopted!;
      try {
        if (!tree) throw new Error(`no hand-made BIRD configuration at ${this.mainPath} to take over from`);
        const protocols = a.protocols.map((name) => {
          const p = tree.protocols.find((x) => x.name === name);
          if (!p)
            throw new Error(`protocol ${name} is not in the hand-made BIRD files read from ${handMain}`);
          return keepProtocol(p, tree.templates);
        });
        const link = live.get(a.interface);
        if (!link?.wg) throw new Error(`hand-made WireGuard link ${a.interface} is not there`);
        let keyFile: string | undefined;
        if (link.wg.publicKey !== routerKey) keyFile = await this.keepKey(a.interface);
        record.links.push({
          interface: a.interface,
          protocols,
          addresses: link.addresses,
          routes: link.ownRoutes,
          ...(keyFile ? { keyFile } : {}),
          peerFile: peerFileName(s),
        });
        for (const from of a.files)
          if (
            isAbsolute(from) &&
            from !== this.mainPath &&
            from !== this.remainderPath &&
            (await exists(from))
          )
            moves.push(asideOf(from));
      } catch (err) {
        failed.set(s.uuid, `takeover of ${a.interface}: ${(err as Error).message}`);
      }
    }
    if (handMain === this.mainPath) {
      moves.push(asideOf(this.mainPath));
      // every file the hand-made main file included goes with it: one no longer included would take its
      // protocols down, and one the agent's main file includes too (peerConfDir) would run under
      // peerops's `dnpeers` and `is_valid_network`; what they define runs from the agent's copy. The
      // operator's local.d is the agent's main file's, kept as it is.
      const localDir = localConfDir({ peerConfDir: dirname(this.remainderPath) });
      for (const f of tree?.files ?? [])
        if (f.file !== handMain && dirname(f.file) !== localDir && (await exists(f.file)))
          moves.push(asideOf(f.file));
    }
    for (const m of moves) if (!record.setAside.some((x) => x.from === m.from)) record.setAside.push(m);
    if (tree) this.keepRemainder(record, tree.files, mainNames);
    await this.save();
    return failed;
  }

  /** The hand-made tree as the operator wrote it: a file an earlier takeover set aside is read where it is now. */
  private async handMadeTree(handMain: string | undefined) {
    if (!handMain) return undefined;
    return readBirdTree(handMain, { setAsideSuffix: SET_ASIDE_SUFFIX }).catch(() => undefined);
  }

  /** What the set-aside files define besides the adopted protocols, in the record (remainder.ts). */
  private keepRemainder(record: AdoptionRecord, files: readonly BirdFile[], mainNames: ReadonlySet<string>) {
    const remainder = renderRemainder({
      files,
      setAside: new Set(record.setAside.map((m) => m.from).filter((f) => f !== this.mainPath)),
      adopted: new Set(record.links.flatMap((l) => l.protocols.map((p) => p.name))),
      mainNames,
    });
    if (remainder === undefined) delete record.remainder;
    else record.remainder = remainder;
  }

  /**
   * Forgets what a takeover read for these sessions and the moves of their files not yet done: BIRD
   * refused what the agent rendered from it, and the operator's mended files are read again. Their
   * protocols are hand-made again: the remainder keeps them, should the others go ahead without them.
   */
  async forget(sessions: readonly AgentSession[], mainNames: ReadonlySet<string>): Promise<void> {
    const record = await this.current();
    const adopted = sessions.map((s) => s.adopted).filter((a): a is Adopted => a !== undefined);
    if (adopted.length === 0) return;
    const names = new Set(adopted.map((a) => a.interface));
    const files = new Set(adopted.flatMap((a) => a.files));
    record.links = record.links.filter((l) => !names.has(l.interface));
    const kept: SetAside[] = [];
    for (const m of record.setAside) if (!files.has(m.from) || (await exists(m.to))) kept.push(m);
    record.setAside = kept;
    const tree = await this.handMadeTree(await this.handMadeMain());
    if (tree) this.keepRemainder(record, tree.files, mainNames);
    await this.save();
  }

  /** The main BIRD file as the operator wrote it: in place, or set aside by an earlier takeover. */
  private async handMadeMain(): Promise<string | undefined> {
    const text = await readTextIfExists(this.mainPath);
    if (text !== undefined && !text.startsWith(AGENT_FILE_HEAD)) return this.mainPath;
    const aside = `${this.mainPath}${SET_ASIDE_SUFFIX}`;
    return (await exists(aside)) ? aside : undefined;
  }

  private async keepKey(name: string): Promise<string> {
    const r = await run('wg', ['show', name, 'private-key']);
    if (r.code !== 0) throw new Error(`reading the private key of ${name}: ${r.stderr.trim()}`);
    const file = join(this.dir, `${name}.key`);
    await this.ensureDir();
    await atomicWriteFile(file, `${r.stdout.trim()}\n`, { mode: 0o600 });
    return file;
  }

  private async ensureDir(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
  }

  private async save(): Promise<void> {
    await this.ensureDir();
    await atomicWriteFile(join(this.dir, RECORD), `${JSON.stringify(this.record, null, 2)}\n`, {
      mode: 0o600,
    });
  }
}

function asideOf(from: string): SetAside {
  return { from, to: `${from}${SET_ASIDE_SUFFIX}` };
}
