/**
 * How the git store's observations reach the disk (docs/store.md, "Status is kept apart"): at each flush
 * the routers' mesh keys that changed are committed to the status ref, in one commit, and every other
 * observation is written to the observation file (observations.ts). The follower and the store only say
 * what changed (routerStatusChanged, fileStale); this module alone keeps that bookkeeping.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { dump } from 'js-yaml';
import type pino from 'pino';
import { routerPath } from '../../../common/manifests.ts';
import type { StoreIndex } from '../core/store-index.ts';
import type { Actor } from '../store.ts';
import { encodeObject } from '../gitdb/objects.ts';
import type { FileWrite } from './branch.ts';
import type { Commits } from './commits.ts';
import { YAML } from './file-writes.ts';
import { ObservationFile, routerState } from './observations.ts';

/** Mesh-key files made per turn of the event loop (commitMeshKeys). */
const MESH_KEYS_PER_TURN = 50;
const CONTROLLER: Actor = { name: 'controller', role: 'controller' };

export class ObservationFlush {
  /** Routers whose committed status (the mesh key) is not on the status ref yet. */
  private readonly dirtyRouters = new Set<string>();
  /** The observation file must be written at the next flush, whatever arrived (fileStale). */
  private stale = false;
  private save: Promise<void> = Promise.resolve();
  private readonly file: ObservationFile;
  private readonly index: StoreIndex;
  private readonly commits: Commits;
  private readonly log: pino.Logger;

  constructor(parts: { gitdir: string; index: StoreIndex; commits: Commits; log: pino.Logger }) {
    this.file = new ObservationFile(parts.gitdir);
    this.index = parts.index;
    this.commits = parts.commits;
    this.log = parts.log;
  }

  /** A router whose committed status (its mesh key, or its removal) the next flush commits. */
  routerStatusChanged(name: string): void {
    this.dirtyRouters.add(name);
  }

  /** The observation file does not hold what the index does (an older release committed observations). */
  fileStale(): void {
    this.stale = true;
  }

  /**
   * Commit the mesh keys that changed since the last flush (one commit on the status ref), then write the
   * observations to the observation file, if any arrived. The file is written outside the write queue:
   * it is no part of the repository, and with 100,000 sessions writing it (15 MiB, fsynced) took long
   * enough to hold up every create queued behind it.
   */
  async flush(): Promise<void> {
    if (await this.commitMeshKeys()) await this.saveFile();
  }

  /** At start: the observations of the last flush, over what the status ref holds. */
  async restore(): Promise<void> {
    try {
      const invalid = await this.file.restoreInto(this.index);
      if (invalid > 0)
        this.log.warn({ entries: invalid }, 'store: invalid observations left out; agents report them again');
    } catch (err) {
      this.log.warn({ err: String(err) }, 'store: observations not restored; agents report them again');
    }
  }

  /** The mesh-key commit of flush; true when the observation file must be written. */
  private commitMeshKeys(): Promise<boolean> {
    return this.commits.serialised(async () => {
      const routers = [...this.dirtyRouters];
      this.dirtyRouters.clear();
      if (routers.length > 0) {
        const writes: FileWrite[] = [];
        for (const [i, name] of routers.entries()) {
          // A fleet of agents started together brings a thousand new keys: their files (YAML, then
          // deflated as blobs: 170 ms at 1,000) are made a slice per turn of the event loop, so that the
          // heartbeats coming in meanwhile are answered in between (docs/benchmarks.md, the storm).
          if (i > 0 && i % MESH_KEYS_PER_TURN === 0) await nextTurn();
          const state = routerState(this.index.getRouter(name)?.status ?? {});
          // no file for a router without a committed field (or without a router)
          const text = Object.keys(state).length > 0 ? dump({ status: state }, YAML) : undefined;
          const blob = text === undefined ? undefined : encodeObject('blob', Buffer.from(text, 'utf8'));
          writes.push({ path: routerPath(name), text, parsed: state, ...(blob ? { blob } : {}) });
        }
        try {
          await this.commits.commitStatus(writes, CONTROLLER, `mesh keys of ${routers.length} router(s)`);
        } catch (err) {
          for (const n of routers) this.dirtyRouters.add(n);
          this.log.error({ err }, 'store: committing mesh keys failed; kept for the next flush');
          throw err;
        }
      }
      if (!this.index.hasUnflushed() && !this.stale) return false;
      this.index.allFlushed();
      this.stale = false;
      return true;
    });
  }

  /** One write of the observation file at a time, in the order asked: the last holds the newest. */
  private saveFile(): Promise<void> {
    const save = this.save
      .catch(() => {})
      .then(() => this.file.saveFrom(this.index))
      .catch((err: unknown) => {
        // saveFrom writes every observation: the next flush writes them all again
        this.stale = true;
        this.log.error({ err }, 'store: writing observations failed; kept for the next flush');
        throw err;
      });
    this.save = save;
    return save;
  }
}
