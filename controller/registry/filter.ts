/**
 * The prefix filter the controller sends its agents (GET /agent/:router/bird-config, `filter`): the
 * registry's filter.txt / filter6.txt, or the built-in copy without a registry (docs/routing-policy.md).
 * Read at most once a minute, since every agent asks on every pass; a registry that cannot be read or
 * whose files do not parse keeps the last good filter, and the reason is logged once.
 */
import { BUILTIN_FILTER, type Dn42Filter } from '../../common/dn42-filter.ts';
import { readFilter, type RegistryFiles, type RouteSource } from './routes.ts';

export interface FilterLog {
  warn(obj: object, msg: string): void;
}

export class RegistryFilter {
  private readonly files: (() => Promise<RegistryFiles>) | undefined;
  private readonly log: FilterLog;
  private readonly maxAgeMs: number;
  private last: Dn42Filter = BUILTIN_FILTER;
  private readAt = -Infinity;
  private reading: Promise<Dn42Filter> | undefined;
  private lastError: string | undefined;

  constructor(registry: RouteSource | undefined, log: FilterLog, maxAgeMs = 60_000) {
    this.files = registry?.files?.bind(registry);
    this.log = log;
    this.maxAgeMs = maxAgeMs;
  }

  /** The current filter: the built-in copy without a registry, else the registry's (read when stale). */
  current(): Promise<Dn42Filter> {
    const files = this.files;
    if (!files || Date.now() - this.readAt < this.maxAgeMs) return Promise.resolve(this.last);
    this.reading ??= this.read(files).finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(files: () => Promise<RegistryFiles>): Promise<Dn42Filter> {
    try {
      this.last = await readFilter(await files());
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
