/**
 * Where webhook definitions live, with the secret each delivery is signed with. Beside the store, not in
 * it (docs/decisions.md, "Webhook secrets beside the store"): the git store's history is pushed to forges
 * and kept for ever, and custom resources are readable by whoever may read peerops resources. So:
 * - git store (one instance): `<dataDir>/webhooks.json`, mode 0600, replaced atomically;
 * - Kubernetes store (several replicas): the Secret `peerops-webhooks` (kubernetes.ts).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { atomicWriteFile, diskErrorCode } from '../../common/atomic-write.ts';
import { DomainError } from '../../common/errors.ts';
import { readTextIfExists } from '../../common/read-file.ts';
import type { EventType } from '../store/core/events.ts';

export interface Webhook {
  id: string;
  url: string;
  /** null: an admin's hook (every event); else the ASN whose sessions' events it receives. */
  asn: number | null;
  /** Only these events; empty: every event the hook may receive. */
  events: EventType[];
  /** base64url of 32 random bytes: the HMAC-SHA256 key. Never logged, returned once at creation. */
  secret: string;
  createdAt: string;
  createdBy: string;
}

export type NewWebhook = Pick<Webhook, 'url' | 'asn' | 'events' | 'createdBy'>;

export interface WebhookRepository {
  list(): Promise<Webhook[]>;
  /** Adds the hook; `admit` sees the hooks there are, in the same write, and throws to refuse. */
  create(hook: NewWebhook, admit?: (hooks: Webhook[]) => void): Promise<Webhook>;
  /** Removes the hook if `match` accepts it; false when there is no such hook (or it is not the caller's). */
  delete(id: string, match: (hook: Webhook) => boolean): Promise<boolean>;
}

export function newHook(input: NewWebhook): Webhook {
  return {
    id: randomUUID(),
    ...input,
    secret: randomBytes(32).toString('base64url'),
    createdAt: new Date().toISOString(),
  };
}

export function parseHooks(text: string | undefined): Webhook[] {
  if (!text) return [];
  const value = JSON.parse(text) as { webhooks?: Webhook[] };
  return Array.isArray(value.webhooks) ? value.webhooks : [];
}

export const serialise = (hooks: Webhook[]) => `${JSON.stringify({ webhooks: hooks }, null, 2)}\n`;

export type Edit<T> = (hooks: Webhook[]) => { hooks: Webhook[]; result: T };

/** create and delete over a back end's one atomic read-edit-write (`change`). */
export abstract class EditedWebhooks implements WebhookRepository {
  abstract list(): Promise<Webhook[]>;
  protected abstract change<T>(edit: Edit<T>): Promise<T>;

  create(input: NewWebhook, admit?: (hooks: Webhook[]) => void): Promise<Webhook> {
    const hook = newHook(input);
    return this.change((hooks) => {
      admit?.(hooks);
      return { hooks: [...hooks, hook], result: hook };
    });
  }

  delete(id: string, match: (hook: Webhook) => boolean): Promise<boolean> {
    return this.change((hooks) => {
      const keep = hooks.filter((h) => h.id !== id || !match(h));
      return { hooks: keep, result: keep.length !== hooks.length };
    });
  }
}

/** The git store's repository: one file in the data dir, owner-only; writes one at a time. */
export class FileWebhooks extends EditedWebhooks {
  private readonly path: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(dataDir: string) {
    super();
    this.path = join(dataDir, 'webhooks.json');
  }

  async list(): Promise<Webhook[]> {
    return parseHooks(await readTextIfExists(this.path));
  }

  protected change<T>(edit: Edit<T>): Promise<T> {
    const next = this.queue.then(async () => {
      const { hooks, result } = edit(await this.list());
      await atomicWriteFile(this.path, serialise(hooks), { mode: 0o600 }).catch((err: unknown) => {
        // a full or read-only data dir, as the store answers it (docs/store.md, "Crash safety")
        const code = diskErrorCode(err);
        if (code === undefined) throw err;
        throw new DomainError(
          'STORE_UNAVAILABLE',
          `the data directory refuses writes (${code}): the webhook was not saved, try again later`,
        );
      });
      return result;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}
