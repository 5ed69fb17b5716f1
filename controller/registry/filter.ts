/**
 * The prefix filter the controller sends its agents (GET /agent/:router/bird-config, `filter`): the
 * registry's filter.txt / filter6.txt (docs/routing-policy.md). Read at most once a minute, since every
 * agent asks on every pass; a registry that cannot be read or whose files do not parse keeps the last
 * good filter, and the reason is logged once. Sent only when it is not the built-in copy every agent
 * has: an agent older than the field refuses an answer that carries it (docs/api.md).
 */
import { BUILTIN_FILTER, type Dn42Filter } from '../../common/dn42-filter.ts';
import { readFilter, type RegistryFiles, type RouteSource } from './routes.ts';

export interface FilterLog {
  warn(obj: object, msg: string): void;
}

const BUILTIN_JSON = JSON.stringify(BUILTIN_FILTER);

export class RegistryFilter {
  private readonly files: (() => Promise<RegistryFiles>) | undefined;
  private readonly log: FilterLog;
  private readonly maxAgeMs: number;
  /** The last good filter, undefined while it is the built-in copy. */
  private last: Dn42Filter | undefined;
  private readAt = -Infinity;
  private reading: Promise<Dn42Filter | undefined> | undefined;
  private lastError: string | undefined;

  constructor(registry: RouteSource | undefined, log: FilterLog, maxAgeMs = 60_000) {
    this.files = registry?.files?.bind(registry);
    this.log = log;
    this.maxAgeMs = maxAgeMs;
  }

  /** The filter to send: the registry's (read when stale), undefined while it is the built-in copy. */
  sent(): Promise<Dn42Filter | undefined> {
    const files = this.files;
    if (!files || Date.now() - this.readAt < this.maxAgeMs) return Promise.resolve(this.last);
    this.reading ??= this.read(files).finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(files: () => Promise<RegistryFiles>): Promise<Dn42Filter | undefined> {
    try {
      const filter = await readFilter(await files());
      this.last = JSON.stringify(filter) === BUILTIN_JSON ? undefined : filter;
      this.lastError = undefined;
    } catch (err) {
      const message = (err as Error).message;
      if (message !== this.lastError)
        this.log.warn(
          { err: message },
          "the registry's filter cannot be read; agents keep the last good one",
        );
      this.lastError = message;
    }
    this.readAt = Date.now();
    return this.last;
  }
}
