/**
 * The Kubernetes store's session writes, each persisting what the core judged (../core/backend.ts): a
 * create claims its port, writes spec, first status and events in one call, and counts its limits again
 * against the API server; a change is one replace at the resourceVersion read (docs/kubernetes.md, "One
 * write per change"); a delete leaves its events in a record first (outbox.ts). A 409 throws StaleObject:
 * the back end re-reads the session and runs the attempt again.
 */
import type pino from 'pino';
import { atGeneration } from '../../../common/conditions.ts';
import { sessionExistsError, type AdmissionSession } from '../../../common/rules/index.ts';
import { GROUP_VERSION, type SessionSpec, type SessionStatusRecord } from '../../../common/schema.ts';
import type { Judged, PreparedChange, PreparedSession } from '../core/backend.ts';
import type { Outbox, OutboxChange } from '../core/outbox.ts';
import { sessionNotFound } from '../core/refusals.ts';
import type { Actor, Session } from '../store.ts';
import {
  LABEL_ASN,
  LABEL_ROUTER,
  isAlreadyExists,
  isConflict,
  isNotFound,
  storeError,
  type KubeApi,
} from './api.ts';
import { audit, withAudit, type AuditEvents } from './audit.ts';
import { stampedStatus } from './generation.ts';
import { rvOf, StaleObject, type KubeObjects, type SessionResource } from './objects.ts';
import { ANNOTATION_OUTBOX, nextEntries, parseEntries, withOutbox } from './outbox.ts';
import type { OutboxWrites } from './outbox-writes.ts';
import type { PortClaims } from './port-claims.ts';

export interface SessionWriteParts {
  api: KubeApi;
  objects: KubeObjects;
  claims: PortClaims;
  outbox: OutboxWrites;
  eventOutbox: Outbox;
  events: AuditEvents;
  log: pino.Logger;
}

export class SessionWrites {
  private readonly api: KubeApi;
  private readonly objects: KubeObjects;
  private readonly claims: PortClaims;
  private readonly outbox: OutboxWrites;
  private readonly eventOutbox: Outbox;
  private readonly events: AuditEvents;
  private readonly log: pino.Logger;

  constructor(parts: SessionWriteParts) {
    this.api = parts.api;
    this.objects = parts.objects;
    this.claims = parts.claims;
    this.outbox = parts.outbox;
    this.eventOutbox = parts.eventOutbox;
    this.events = parts.events;
    this.log = parts.log;
  }

  /** Claims a port for the judged draft, then creates the object with its first status and events, one call. */
  async create(prepared: Judged<PreparedSession>, actor: Actor, message: string): Promise<Session> {
    const { name, spec: draft, status: first } = prepared;
    const reserving = this.claims.reserving(draft.router);
    const { port, claimed } = await this.claims.claim(name, draft.router, (taken) =>
      prepared.allocatePort(taken),
    );
    try {
      const spec: SessionSpec = { ...draft, listenPort: port };
      let created: SessionResource;
      try {
        created = await this.api.create<SessionSpec, Partial<SessionStatusRecord>>('PeeringSession', {
          apiVersion: GROUP_VERSION,
          kind: 'PeeringSession',
          metadata: {
            name,
            labels: { [LABEL_ROUTER]: spec.router, [LABEL_ASN]: String(spec.asn) },
            annotations: withOutbox(audit(actor, message), prepared.outbox.add),
          },
          spec,
          status: atGeneration(first, 1),
        });
      } catch (err) {
        if (isAlreadyExists(err)) throw sessionExistsError(spec.asn, spec.router);
        if (claimed) await this.api.releaseClaim(spec.router, port, name).catch(() => undefined);
        throw storeError(err, `create session ${name}`);
      }
      this.objects.applyPut('PeeringSession', created);
      await this.recheckAdmission(created, prepared);
      this.eventOutbox.apply(prepared.outbox);
      this.outbox.dropElsewhere(prepared.outbox);
      this.events.record(created, 'Created', actor, `${message} (status ${first.code} ${first.name})`);
      return this.objects.sessionNamed(name);
    } finally {
      reserving.delete(port);
    }
  }

  /**
   * The count limits again, for a session just created, against what the API server holds now: replicas
   * do not see each other's creates in flight, so on a router with maxSessions or under a policy with
   * maxPendingPerAsn each could pass the check above at the same instant. The sessions of the router
   * (or ASN) are listed (a consistent read, by the labels every create sets; sessions without them, from
   * kubectl, are counted from the index) and the create is taken back if it went over. Of creates racing
   * on several replicas, the one that lists last sees every other one stored, so no more than the limit
   * are kept; a race may take back more than needed (each sees the other): refused, never over the
   * limit. For the moment between create and take-back, the extra session is visible (docs/kubernetes.md).
   */
  private async recheckAdmission(created: SessionResource, prepared: PreparedSession): Promise<void> {
    const { spec } = created;
    const name = created.metadata.name;
    const { perRouter, perAsn } = prepared.limits;
    if (!perRouter && !perAsn) return;
    const fresh = async (label: string, value: string, match: (s: SessionSpec) => boolean) => {
      const listed = await this.api.list<SessionSpec, Partial<SessionStatusRecord>>(
        'PeeringSession',
        `${label}=${value}`,
      );
      const out: AdmissionSession[] = [];
      for (const item of listed.items)
        if (item.metadata.name !== name && match(item.spec))
          out.push({ name: item.metadata.name, spec: item.spec, status: this.objects.statusOf(item) });
      // unlabelled sessions (applied with kubectl) cannot be listed by label: the index has them
      for (const { value: indexed } of this.objects.sessionResources())
        if (
          indexed.metadata.name !== name &&
          indexed.metadata.labels?.[label] !== value &&
          match(indexed.spec)
        )
          out.push({
            name: indexed.metadata.name,
            spec: indexed.spec,
            status: this.objects.statusOf(indexed),
          });
      return out;
    };
    let onRouter: AdmissionSession[] | undefined;
    let ofAsn: AdmissionSession[] | undefined;
    try {
      [onRouter, ofAsn] = await Promise.all([
        perRouter ? fresh(LABEL_ROUTER, spec.router, (s) => s.router === spec.router) : undefined,
        perAsn ? fresh(LABEL_ASN, String(spec.asn), (s) => s.asn === spec.asn) : undefined,
      ]);
    } catch (err) {
      await this.takeBack(created);
      throw storeError(err, `count the sessions beside ${name}`);
    }
    try {
      prepared.readmit({
        ...(onRouter ? { onRouter } : {}),
        ...(ofAsn ? { ofAsn } : {}),
      });
    } catch (err) {
      this.log.info({ session: name, err }, 'create taken back: a limit was reached on another replica');
      await this.takeBack(created);
      throw err;
    }
  }

  /** Deletes a session this replica just created, and its port claim. */
  private async takeBack(created: SessionResource): Promise<void> {
    const name = created.metadata.name;
    try {
      await this.api.delete('PeeringSession', name);
    } catch (err) {
      if (!isNotFound(err)) throw storeError(err, `take back session ${name}`);
    }
    this.objects.applyDelete('PeeringSession', created);
    await this.api
      .releaseClaim(created.spec.router, created.spec.listenPort, name)
      .catch((err: unknown) => this.log.warn({ err, session: name }, 'port claim not released'));
  }

  /** A judged change (or delete) of the session, at the resourceVersion the index was read from. */
  async change(change: Judged<PreparedChange>, actor: Actor, message: string): Promise<Session | undefined> {
    const { uuid } = change.current.spec;
    const current = this.objects.session(change.current.name);
    if (!current || current.spec.uuid !== uuid) throw sessionNotFound(uuid);
    const name = current.metadata.name;
    try {
      if (change.delete) {
        await this.deleteSession(current, change.outbox);
        await this.api
          .releaseClaim(current.spec.router, current.spec.listenPort, name)
          .catch((err: unknown) => this.log.warn({ err, session: name }, 'port claim not released'));
        this.events.record(current, 'Deleted', actor, message);
        return undefined;
      }
      const { spec, status, specChanged, statusChanged } = change;
      if (!specChanged && !statusChanged && change.outbox.add.length + change.outbox.remove.length === 0)
        return this.objects.sessionNamed(name);
      const portMoves = specChanged && spec.listenPort !== current.spec.listenPort;
      if (portMoves) await this.claims.claimChanged(name, current.spec.router, spec.listenPort);
      // spec, status and their events in one call: no reader sees one without the others
      const removed = new Set(change.outbox.remove.map((e) => e.event.id));
      const held = parseEntries(current.metadata.annotations?.[ANNOTATION_OUTBOX]);
      const { entries, over } = nextEntries(held, change.outbox.add, removed);
      if (over > 0)
        this.log.warn(
          { session: name, dropped: over },
          'outbox: the session holds too many events; the oldest dropped',
        );
      const resource = await this.api.replace<SessionSpec, Partial<SessionStatusRecord>>('PeeringSession', {
        ...current,
        metadata: {
          ...current.metadata,
          annotations: withOutbox(withAudit(current.metadata, actor, message).annotations, entries),
        },
        spec,
        status: stampedStatus(current, spec, status),
      });
      this.objects.applyPut('PeeringSession', resource);
      this.eventOutbox.apply(change.outbox);
      this.outbox.dropElsewhere(change.outbox);
      if (portMoves)
        await this.api.releaseClaim(spec.router, current.spec.listenPort, name).catch(() => undefined);
      const what =
        statusChanged && status.code !== current.status?.code
          ? `${message} (status ${status.code} ${status.name})`
          : message;
      if (specChanged || statusChanged)
        this.events.record(resource, specChanged ? 'Updated' : 'StatusChanged', actor, what);
      return this.objects.sessionNamed(name);
    } catch (err) {
      if (isConflict(err))
        throw new StaleObject({ kind: 'PeeringSession', name }, storeError(err, `update session ${name}`));
      if (isNotFound(err)) throw sessionNotFound(uuid);
      throw storeError(err, `update session ${name}`);
    }
  }

  /**
   * A delete: the session's waiting events and the deletion's go to a record first (the object takes its
   * annotation with it), then the object is deleted at the resourceVersion read. The record counts only
   * once the session is gone (outbox.ts); a refused delete's is removed here, and so are those of earlier
   * deletes of the session that can no longer succeed (sent at an older resourceVersion).
   */
  private async deleteSession(current: SessionResource, outbox: OutboxChange): Promise<void> {
    const name = current.metadata.name;
    const uid = current.metadata.uid ?? '';
    const resourceVersion = current.metadata.resourceVersion ?? '';
    const holders = this.objects.outboxHolders;
    const dropRecord = (record: string) =>
      this.api
        .deleteOutboxRecord(record)
        .then(() => holders.removeRecord(record))
        .catch((err: unknown) => this.log.warn({ err, record }, 'outbox: stale deletion record not removed'));
    for (const earlier of holders.recordsOf(uid))
      if ((earlier.session?.rv ?? 0) < rvOf(current)) await dropRecord(earlier.name);
    const removed = new Set(outbox.remove.map((e) => e.event.id));
    const held = parseEntries(current.metadata.annotations?.[ANNOTATION_OUTBOX]);
    const { entries } = nextEntries(held, outbox.add, removed);
    const record =
      entries.length > 0
        ? await this.api.createOutboxRecord(entries, { name, uid, resourceVersion })
        : undefined;
    if (record) this.objects.applyRecord(record);
    try {
      await this.api.delete('PeeringSession', name, resourceVersion);
    } catch (err) {
      if (record?.metadata?.name) await dropRecord(record.metadata.name);
      throw err;
    }
    this.objects.applyDelete('PeeringSession', current);
    this.eventOutbox.apply(outbox);
    this.outbox.dropElsewhere(outbox);
  }
}
