/**
 * Users' session lists joined from each session's record, encoded once per change of what it shows
 * (docs/benchmarks.md, "user-list"). Every router's metrics report changes its sessions' `metrics` and so
 * the lists of every ASN it names; rebuilding a list then re-encodes only the sessions that changed since,
 * not the whole list.
 *
 * A record is made of its session (frozen by the store and replaced on each change), its router (the spec
 * and whether its agent reports: the `routers` topic), the policies (networkAsn: the `policies` topic) and
 * its forge conflict; a kept text is used while all four are what it was made of.
 */
import { topics } from '../store/change-feed.ts';
import type { ForgeConflict } from '../../common/schema.ts';
import type { Session, Store } from '../store/store.ts';

interface Kept {
  json: string;
  routers: number;
  policies: number;
  conflict: ForgeConflict | undefined;
}

/** The JSON text of each session's record, kept per session object. */
export class SessionRecordTexts {
  /** Records encoded so far (tests count them). */
  encoded = 0;
  private readonly kept = new WeakMap<Session, Kept>();
  private readonly store: Store;
  private readonly encode: (session: Session, conflict: ForgeConflict | undefined) => string;

  /** `encode`: the record's JSON (views.ts sessionRecord) with the session's conflict. */
  constructor(store: Store, encode: (session: Session, conflict: ForgeConflict | undefined) => string) {
    this.store = store;
    this.encode = encode;
  }

  /** `{"sessions":[…]}` of these sessions, in this order. */
  list(sessions: readonly Session[]): string {
    const routers = this.store.revision(topics.routers);
    const policies = this.store.revision(topics.policies);
    const texts = sessions.map((session) => {
      const conflict = this.store.forgeConflictOf?.(session.spec.uuid);
      const kept = this.kept.get(session);
      if (kept && kept.routers === routers && kept.policies === policies && kept.conflict === conflict)
        return kept.json;
      this.encoded++;
      const json = this.encode(session, conflict);
      this.kept.set(session, { json, routers, policies, conflict });
      return json;
    });
    return `{"sessions":[${texts.join(',')}]}`;
  }
}
