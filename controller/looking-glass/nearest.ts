/**
 * The nearest router to a peer (docs/api.md, Nearest router): each router accepting sessions pings the
 * peer's WireGuard endpoint through the looking glass (its agent's ping), and the routers come back
 * sorted by the RTT measured. The endpoint is judged by the WireGuard endpoint rule (common/net.ts): a
 * host name is resolved here and each address it gives must be one a router may send tunnel packets to,
 * under each router's policy (allowPrivateEndpoints).
 *
 * One measurement per endpoint is shared by every caller for NEAR_CACHE_MS; a caller starts at most
 * NEAR_PER_CALLER_PER_MINUTE new ones, and the broker's per-router bound holds beside that.
 */
import {
  resolveEndpoint,
  EndpointRefused,
  systemResolve,
  type Resolve,
} from '../../common/endpoint-resolve.ts';
import { problem } from '../../common/messages.ts';
import { canonicalEndpoint, parseEndpoint } from '../../common/net.ts';
import { parsePingAvg } from '../../common/ping.ts';
import type { Router, Store } from '../store/store.ts';
import type { LookingGlassBroker } from './broker.ts';

/** How long a measurement is shared. */
export const NEAR_CACHE_MS = 5 * 60_000;
/** New measurements a caller may start per minute (cached answers are free). */
export const NEAR_PER_CALLER_PER_MINUTE = 6;
/** Endpoints remembered at once; the oldest goes first. */
const NEAR_CACHE_ENTRIES = 1000;
/** How long a router's agent has to answer: its ping runs 2 s. */
const NEAR_ANSWER_WAIT_MS = 10_000;

export interface RouterDistance {
  name: string;
  displayName: string;
  region: string;
  location: string | null;
  /** Mean RTT in ms from the router to the endpoint; null: no answer (see `problem`). */
  rtt: number | null;
  /** Why there is no RTT: the endpoint did not answer, the agent did not, the policy refuses the address. */
  problem?: string;
}

export interface NearAnswer {
  endpoint: string;
  measuredAt: string;
  routers: RouterDistance[];
}

const byRtt = (a: RouterDistance, b: RouterDistance) =>
  (a.rtt ?? Infinity) - (b.rtt ?? Infinity) || a.name.localeCompare(b.name);

export class NearestRouters {
  private readonly store: Store;
  private readonly broker: Pick<LookingGlassBroker, 'ask'>;
  private readonly resolve: Resolve;
  private readonly cache = new Map<string, { expires: number; answer: Promise<NearAnswer> }>();
  private readonly started = new Map<string, number[]>();

  constructor(store: Store, broker: Pick<LookingGlassBroker, 'ask'>, resolve: Resolve = systemResolve) {
    this.store = store;
    this.broker = broker;
    this.resolve = resolve;
  }

  /**
   * `routers` (those accepting sessions) by RTT to `endpoint` (checked well-formed by the caller), for
   * `caller` (the key of its rate limit).
   */
  near(endpoint: string, caller: string, routers: readonly Router[]): Promise<NearAnswer> {
    const key = canonicalEndpoint(endpoint);
    const now = Date.now();
    const kept = this.cache.get(key);
    if (kept && kept.expires > now) return kept.answer;
    const recent = (this.started.get(caller) ?? []).filter((t) => now - t < 60_000);
    if (recent.length >= NEAR_PER_CALLER_PER_MINUTE)
      throw problem('near.rateLimited', {
        limit: NEAR_PER_CALLER_PER_MINUTE,
        minutes: NEAR_CACHE_MS / 60_000,
      });
    this.started.set(caller, [...recent, now]);
    // callers of the last minute only: the map stays as small as the callers are few
    if (this.started.size > NEAR_CACHE_ENTRIES)
      for (const [k, times] of this.started)
        if (times.every((t) => now - t >= 60_000)) this.started.delete(k);
    const answer = this.measure(key, routers);
    this.cache.delete(key);
    this.cache.set(key, { expires: now + NEAR_CACHE_MS, answer });
    // a failed measurement is not shared: the next caller tries again
    answer.catch(() => this.cache.delete(key));
    for (const [k, v] of this.cache) {
      if (this.cache.size <= NEAR_CACHE_ENTRIES && v.expires > now) break;
      this.cache.delete(k);
    }
    return answer;
  }

  private async measure(endpoint: string, routers: readonly Router[]): Promise<NearAnswer> {
    // one resolution per policy answer: the routers' policies allow private endpoints or not
    const resolved = new Map<boolean, Promise<string>>();
    const addressFor = (allowPrivate: boolean) => {
      let address = resolved.get(allowPrivate);
      if (!address)
        resolved.set(
          allowPrivate,
          (address = resolveEndpoint(endpoint, allowPrivate, this.resolve).then(
            (hostPort) => parseEndpoint(hostPort)?.host ?? '',
          )),
        );
      return address;
    };
    const distances = await Promise.all(
      routers.map(async (router): Promise<RouterDistance> => {
        const distance = {
          name: router.name,
          displayName: router.spec.displayName,
          region: router.spec.region,
          location: router.spec.location ?? null,
          rtt: null,
        };
        let target: string;
        try {
          target = await addressFor(this.store.policyFor(router.name).allowPrivateEndpoints === true);
        } catch (err) {
          if (err instanceof EndpointRefused) return { ...distance, problem: err.message };
          throw err;
        }
        try {
          const answer = await this.broker.ask(router.name, { op: 'ping', target }, NEAR_ANSWER_WAIT_MS);
          const rtt = parsePingAvg(answer.output);
          return rtt === null
            ? { ...distance, problem: `${target} did not answer the router's ping` }
            : { ...distance, rtt };
        } catch (err) {
          return { ...distance, problem: (err as Error).message };
        }
      }),
    );
    return { endpoint, measuredAt: new Date().toISOString(), routers: distances.sort(byRtt) };
  }
}
