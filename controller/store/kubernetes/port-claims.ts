/**
 * One session per listen port and router, across replicas: a port is claimed with a ConfigMap named
 * `peerops-port-<router>-<port>` before the session is created (docs/kubernetes.md, How the store works).
 * Creating a named object is atomic in the API server, so two replicas never both hold a port; the claim
 * names its session, so one left by a crash between claim and create is recognised (no such session
 * after a grace period) and taken over with a resourceVersion-checked replace.
 */
import type pino from 'pino';
import type { SessionSpec } from '../../../common/schema.ts';
import { portTaken } from '../core/refusals.ts';
import { isAlreadyExists, isConflict, storeError, type KubeApi } from './api.ts';
import { fault } from '../../../common/messages.ts';

export class PortClaims {
  private readonly api: KubeApi;
  private readonly staleClaimMs: number;
  private readonly log: pino.Logger;
  /** The indexed session of a name (to tell a claim of a live session from a stale one). */
  private readonly sessionSpec: (name: string) => SessionSpec | undefined;
  /** Ports this process is claiming right now, per router. */
  private readonly inFlight = new Map<string, Set<number>>();

  constructor(
    api: KubeApi,
    staleClaimMs: number,
    log: pino.Logger,
    sessionSpec: (name: string) => SessionSpec | undefined,
  ) {
    this.api = api;
    this.staleClaimMs = staleClaimMs;
    this.log = log;
    this.sessionSpec = sessionSpec;
  }

  /** The ports of `router` this process is claiming; the caller removes its port once the create ended. */
  reserving(router: string): Set<number> {
    let ports = this.inFlight.get(router);
    if (!ports) this.inFlight.set(router, (ports = new Set()));
    return ports;
  }

  /**
   * Claims a free listen port on the router for session `name`; `allocate` picks one besides those taken
   * (the core's allocatePort). A claim that already names this session belongs to a concurrent create of
   * the same session: its port is used, and creating the object decides.
   */
  async claim(
    name: string,
    router: string,
    allocate: (taken: number[]) => number,
  ): Promise<{ port: number; claimed: boolean }> {
    const reserving = this.reserving(router);
    const taken = new Set<number>();
    for (let attempt = 0; attempt < 1000; attempt++) {
      const port = allocate([...reserving, ...taken]);
      reserving.add(port);
      try {
        await this.api.createClaim(router, port, name);
        return { port, claimed: true };
      } catch (err) {
        if (!isAlreadyExists(err)) {
          reserving.delete(port);
          throw storeError(err, `claim port ${port} on router ${router}`);
        }
      }
      const claim = await this.api.readClaim(router, port).catch((err: unknown) => {
        reserving.delete(port);
        throw storeError(err, `read the claim of port ${port} on router ${router}`);
      });
      const owner = claim?.data?.['session'];
      if (owner === name) return { port, claimed: false };
      const ownerSpec = owner ? this.sessionSpec(owner) : undefined;
      // claimedAt is renewed on takeover (creationTimestamp is not)
      const claimedAt = Date.parse(claim?.data?.['claimedAt'] ?? '');
      const age =
        Date.now() -
        (Number.isNaN(claimedAt) ? (claim?.metadata?.creationTimestamp?.getTime() ?? Date.now()) : claimedAt);
      const stale =
        claim !== undefined &&
        ((ownerSpec !== undefined && ownerSpec.listenPort !== port) ||
          (ownerSpec === undefined &&
            age >= this.staleClaimMs &&
            (owner === undefined || !(await this.api.get('PeeringSession', owner)))));
      if (stale) {
        try {
          await this.api.replaceClaim(claim, name);
          this.log.warn({ router, port, previous: owner }, 'took over a stale port claim');
          return { port, claimed: true };
        } catch (err) {
          if (!isConflict(err)) {
            reserving.delete(port);
            throw storeError(err, `take over port ${port} on router ${router}`);
          }
        }
      }
      reserving.delete(port);
      taken.add(port);
    }
    throw fault('router.noPortClaim', { router });
  }

  /**
   * Claims the port an update moves session `name` to. The index's owner was refused already (the core's
   * prepareSessionChange); the claim tells of another replica's.
   */
  async claimChanged(name: string, router: string, port: number): Promise<void> {
    try {
      await this.api.createClaim(router, port, name);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const claim = await this.api.readClaim(router, port);
      const holder = claim?.data?.['session'];
      if (holder !== name) throw portTaken(port, holder ?? 'unknown');
    }
  }
}
