/**
 * Who changed what, kept by the Kubernetes store: the last actor and message as annotations on the object
 * (the API server's audit log has the full trail), and an Event per write, best effort.
 */
import type pino from 'pino';
import type { Actor } from '../store.ts';
import { ANNOTATION_ACTOR, ANNOTATION_MESSAGE, type KubeApi, type Resource } from './api.ts';

export function audit(actor: Actor, message: string): Record<string, string> {
  return { [ANNOTATION_ACTOR]: actor.name, [ANNOTATION_MESSAGE]: message.slice(0, 1024) };
}

export function withAudit<M extends { annotations?: Record<string, string> }>(
  metadata: M,
  actor: Actor,
  message: string,
): M {
  return { ...metadata, annotations: { ...metadata.annotations, ...audit(actor, message) } };
}

/** The Events this replica writes; close() waits for them. */
export class AuditEvents {
  private readonly api: KubeApi;
  private readonly log: pino.Logger;
  private readonly writing = new Set<Promise<void>>();

  constructor(api: KubeApi, log: pino.Logger) {
    this.api = api;
    this.log = log;
  }

  /** Records who changed what as an Event on the object; best effort, never fails the write. */
  record(object: Resource<unknown, unknown>, reason: string, actor: Actor, message: string): void {
    const written = this.api
      .recordEvent(object, reason, actor.name, message)
      .catch((err: unknown) =>
        this.log.debug({ err, object: object.metadata.name }, 'audit event not written'),
      )
      .finally(() => this.writing.delete(written));
    this.writing.add(written);
  }

  async settled(): Promise<void> {
    await Promise.all(this.writing);
  }
}
