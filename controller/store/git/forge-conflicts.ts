/**
 * The forge conflicts the git store keeps (docs/gitops.md, "When the forge and the API change the same
 * file"): changes the store acknowledged that an edit on the forge replaced when a remote cycle rebuilt
 * the store's commits on the forge's tip (remote.ts). They live in one file on the status ref, committed
 * with the ref move that replaced the change and pushed with the status branch, so neither a restart nor
 * a lost disk forgets them. A record goes when an admin clears it or, unresolved, after 7 days.
 */
import { dump, load } from 'js-yaml';
import { ForgeConflict as ForgeConflictSchema, type ForgeConflict } from '../../../common/schema.ts';
import { validate } from '../../../common/validate.ts';
import type { FileWrite } from './branch.ts';
import { YAML } from './file-writes.ts';
import { fault, fieldError } from '../../../common/messages.ts';

/** The file on the status ref. */
export const CONFLICTS_PATH = 'conflicts/forge.yaml';
/** How long an unresolved conflict is listed (and keeps the store's ForgeConflicts condition True). */
export const CONFLICT_WINDOW_MS = 7 * 24 * 3600 * 1000;

/** What a change of the list means for readers: conflicts that appeared and that went. */
export interface ConflictChange {
  added: ForgeConflict[];
  removed: ForgeConflict[];
}

export class ForgeConflictRecords {
  private records: ForgeConflict[] = [];
  /** The blob the records in memory were read from. */
  private oid: string | undefined;

  /** The conflicts of the last 7 days not yet cleared, oldest first. */
  list(now = Date.now()): ForgeConflict[] {
    return this.records.filter((c) => Date.parse(c.detectedAt) > now - CONFLICT_WINDOW_MS);
  }

  /** The newest listed conflict of a session. */
  ofSession(uuid: string): ForgeConflict | undefined {
    return this.list()
      .filter((c) => c.session?.uuid === uuid)
      .at(-1);
  }

  /**
   * The records as the file `oid` holds them (undefined: no file); unchanged when it is the same blob.
   * The store's own file, not people's: read without the bounds of a manifest. Throws on broken YAML.
   */
  load(oid: string | undefined, text: string | undefined): ConflictChange & { skipped: number } {
    if (oid === this.oid) return { added: [], removed: [], skipped: 0 };
    const doc = text === undefined ? undefined : (load(text, YAML) as { conflicts?: unknown } | undefined);
    const entries = Array.isArray(doc?.conflicts) ? (doc.conflicts as unknown[]) : [];
    const next: ForgeConflict[] = [];
    for (const entry of entries) {
      const checked = validate<ForgeConflict>(ForgeConflictSchema, entry);
      if (checked.ok) next.push(checked.value);
    }
    const before = new Set(this.records.map((c) => c.id));
    const after = new Set(next.map((c) => c.id));
    const change = {
      added: next.filter((c) => !before.has(c.id)),
      removed: this.records.filter((c) => !after.has(c.id)),
      skipped: entries.length - next.length,
    };
    this.records = next;
    this.oid = oid;
    return change;
  }

  /** The file with `found` added (a conflict already recorded is not added twice) and expired ones dropped. */
  adding(found: ForgeConflict[], now = Date.now()): FileWrite {
    const known = new Set(this.records.map((c) => c.id));
    return this.write([...this.list(now), ...found.filter((c) => !known.has(c.id))]);
  }

  /** The file without conflict `id`; NOT_FOUND, naming the field, when no listed conflict has it. */
  clearing(id: string, now = Date.now()): FileWrite {
    const listed = this.list(now);
    if (!listed.some((c) => c.id === id))
      throw fault('forge.conflictNotFound', { id }, [fieldError('/id', 'field.noForgeConflict', { id })]);
    return this.write(listed.filter((c) => c.id !== id));
  }

  private write(conflicts: ForgeConflict[]): FileWrite {
    return { path: CONFLICTS_PATH, text: conflicts.length > 0 ? dump({ conflicts }, YAML) : undefined };
  }
}
