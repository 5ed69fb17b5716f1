/**
 * What the store core asks of the back end it holds (docs/store.md, The store core and the rules), as
 * headscale's `State` holds its database: the core owns the index, the change feed and every rule; a
 * back end persists what the rules judged and puts what its storage holds into the state it is given.
 *
 * "Rules, then persist" is in the types: every persist call takes a `Judged` value, which only the core's
 * rules make, and a back end runs a write only through `write(actor, attempt)`, where `attempt` judges
 * against the index as it is now and then persists. A retry, in the back end's own shape (git catches up
 * and runs the attempt again; Kubernetes re-reads the object after a 409, then runs it again), is another
 * call of `attempt`, so the rules run again on every retry.
 */
import type { PolicySpec, RouterSpec, SessionSpec, SessionStatusRecord } from '../../../common/schema.ts';
import type { AdmissionSession } from '../../../common/rules/index.ts';
import type { Actor, Policy, Router, Session, Store, StoreCapabilities } from '../store.ts';
import type { OutboxChange, Outbox } from './outbox.ts';
import type { RevocationList, Revocations } from './revocations.ts';
import type { StoreIndex } from './store-index.ts';

declare const judged: unique symbol;
/** A value the core's rules judged (store-core.ts): the only thing a back end persists. */
export type Judged<T> = T & { readonly [judged]: true };

/** What the core hands a back end when it opens it: the state the back end fills from its storage. */
export interface CoreState {
  index: StoreIndex;
  /** Revoked tokens, as the back end last stored or read them. */
  revocations: Revocations;
  /** Notification events waiting for delivery, as the back end last stored or read them. */
  outbox: Outbox;
}

/** One attempt of a write: the rules judged against the index as it is now, then what passed persisted. */
export type Attempt<T> = () => Promise<T>;

/** A new router the rules let through. */
export interface NewRouter {
  name: string;
  spec: RouterSpec;
}

/** A router's next spec, checked as a new one would be; `current` as the index holds it. */
export interface RouterUpdate {
  current: Router;
  spec: RouterSpec;
}

/** A router's agent token hash; `spec` is the router's with it. */
export interface TokenHash {
  router: Router;
  sha256: string;
  spec: RouterSpec;
}

/** A session create the rules admitted: the back end stores `spec` (with a port it allocates) and `status`. */
export interface PreparedSession {
  name: string;
  /** Checked, with a placeholder listenPort until the back end allocates one (allocatePort). */
  spec: SessionSpec;
  status: SessionStatusRecord;
  router: RouterSpec;
  /** Its events (created, pending review), to persist with it. */
  outbox: OutboxChange;
  /** A free listen port on the router for the ASN (docs/api.md, ports), besides `taken`; ROUTER_FULL if none. */
  allocatePort(taken?: Iterable<number>): number;
  /** Whether a count limit applies to this create: maxSessions on its router, maxPendingPerAsn of its policy. */
  limits: { perRouter: boolean; perAsn: boolean };
  /**
   * The count limits judged again once stored, with the router's and the ASN's sessions as the storage
   * holds them now (given: they replace the index's); throws what assertAdmission throws. For a back end
   * whose replicas do not see each other's creates in flight (docs/kubernetes.md).
   */
  readmit(fresh: { onRouter?: AdmissionSession[]; ofAsn?: AdmissionSession[] }): void;
}

/**
 * A session update the rules checked: delete it, or store `spec` and `status` (each changed or not); with
 * the events the change makes, to persist with it.
 */
export type PreparedChange =
  | { current: Session; delete: true; outbox: OutboxChange }
  | {
      current: Session;
      delete: false;
      outbox: OutboxChange;
      spec: SessionSpec;
      status: SessionStatusRecord;
      specChanged: boolean;
      statusChanged: boolean;
    };

/** A policy to store. */
export interface PolicyPut {
  name: string;
  spec: PolicySpec;
}

/** The revocation list to store, and what the write says it does. */
export interface RevocationsPut {
  list: RevocationList;
  message: string;
}

export interface StoreBackend extends StoreCapabilities {
  readonly kind: Store['backend'];
  /** Read the storage into the state, and start following it. */
  start(): Promise<void>;
  /** Finish queued writes, persist batched observations, stop following. */
  close(): Promise<void>;
  /** Persist the observations the index buffers (heartbeats, metrics), now. */
  flushObservations(): Promise<void>;
  /**
   * Run a write: call `attempt` in this back end's retry shape (once, or again after catching up or
   * re-reading) and answer what its last call returns or throws. `actor` says who asked (the git store
   * answers a user's or admin's write once the forge holds it, docs/gitops.md, "Push modes").
   */
  write<T>(actor: Actor, attempt: Attempt<T>): Promise<T>;

  // Each persists one judged value, inside an attempt; the index then holds what the storage holds.
  persistNewRouter(router: Judged<NewRouter>, actor: Actor): Promise<Router>;
  persistRouterUpdate(update: Judged<RouterUpdate>, actor: Actor, message: string): Promise<Router>;
  persistRouterRemoval(router: Judged<Router>, actor: Actor): Promise<void>;
  persistTokenHash(token: Judged<TokenHash>, actor: Actor): Promise<void>;
  persistNewSession(session: Judged<PreparedSession>, actor: Actor, message: string): Promise<Session>;
  persistSessionChange(
    change: Judged<PreparedChange>,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined>;
  persistPolicy(policy: Judged<PolicyPut>, actor: Actor): Promise<Policy>;
  persistPolicyRemoval(policy: Judged<Policy>, actor: Actor): Promise<void>;
  persistRevocations(revocations: Judged<RevocationsPut>, actor: Actor): Promise<RevocationList>;
  /** The outbox change alone (appendEvents, confirmDelivered), in a write of its own. */
  persistOutbox(change: Judged<OutboxChange>): Promise<void>;
}
