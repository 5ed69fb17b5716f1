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
import { readTextIfExists } from '../../common/read-file.ts';
import type { EventType } from '../store/core/events.ts';
import { fault } from '../../common/messages.ts';

export interface Webhook {
  id: string;
  url: string;
  /** null: an admin's webhook (every event); else the ASN whose sessions' events it receives. */
  asn: number | null;
  /** Only these events; empty: every event the webhook may receive. */
  events: EventType[];
  /** base64url of 32 random bytes: the HMAC-SHA256 key. Never logged, returned once at creation. */
  secret: string;
  createdAt: string;
  createdBy: string;
}

export type NewWebhook = Pick<Webhook, 'url' | 'asn' | 'events' | 'createdBy'>;

export interface WebhookRepository {
  list(): Promise<Webhook[]>;
  /** Adds the webhook; `admit` sees the webhooks there are, in the same write, and throws to refuse. */
  create(webhook: NewWebhook, admit?: (webhooks: Webhook[]) => void): Promise<Webhook>;
  /** Removes the webhook if `match` accepts it; false when there is no such webhook (or it is not the caller's). */
  delete(id: string, match: (webhook: Webhook) => boolean): Promise<boolean>;
}

export function newWebhook(input: NewWebhook): Webhook {
  return {
    id: randomUUID(),
    ...input,
    secret: randomBytes(32).toString('base64url'),
    createdAt: new Date().toISOString(),
  };
}

export function parseWebhooks(text: string | undefined): Webhook[] {
  if (!text) return [];
  const value = JSON.parse(text) as { webhooks?: Webhook[] };
  return Array.isArray(value.webhooks) ? value.webhooks : [];
}

export const serialise = (webhooks: Webhook[]) => `${JSON.stringify({ webhooks }, null, 2)}\n`;

export type Edit<T> = (webhooks: Webhook[]) => { webhooks: Webhook[]; result: T };

/** create and delete over a back end's one atomic read-edit-write (`change`). */
export abstract class EditedWebhooks implements WebhookRepository {
  abstract list(): Promise<Webhook[]>;
  protected abstract change<T>(edit: Edit<T>): Promise<T>;

  create(input: NewWebhook, admit?: (webhooks: Webhook[]) => void): Promise<Webhook> {
    const webhook = newWebhook(input);
    return this.change((webhooks) => {
      admit?.(webhooks);
      return { webhooks: [...webhooks, webhook], result: webhook };
    });
  }

  delete(id: string, match: (webhook: Webhook) => boolean): Promise<boolean> {
    return this.change((webhooks) => {
      const keep = webhooks.filter((h) => h.id !== id || !match(h));
      return { webhooks: keep, result: keep.length !== webhooks.length };
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
    return parseWebhooks(await readTextIfExists(this.path));
  }

  protected change<T>(edit: Edit<T>): Promise<T> {
    const next = this.queue.then(async () => {
      const { webhooks, result } = edit(await this.list());
      await atomicWriteFile(this.path, serialise(webhooks), { mode: 0o600 }).catch((err: unknown) => {
        // a full or read-only data dir, as the store answers it (docs/store.md, "Crash safety")
        const code = diskErrorCode(err);
        if (code === undefined) throw err;
        throw fault('webhook.notSaved', { reason: code });
      });
      return result;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}
