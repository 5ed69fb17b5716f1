/**
 * Each session's history of RTT, traffic and route counts, from its router's metric reports (docs/store.md,
 * Session history): one append-only file per session in `<data>/history/`, beside the store and never in
 * its git history (a report a minute per session would be a commit a minute). A report's samples wait in
 * memory and are appended once a minute, so a crash of the controller loses at most that minute. Once a
 * day each file is rewritten with its samples older than 24 hours merged to 5 minutes and those older
 * than 30 days left out; a file with nothing newer than 30 days is removed.
 *
 * With the Kubernetes store every replica keeps the reports it receives in its own data directory
 * (docs/decisions.md, Session history).
 */
import { randomInt } from 'node:crypto';
import { mkdir, open, readFile, readdir, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { atomicWriteFile } from '../../common/atomic-write.ts';
import { mapLimit } from '../../common/concurrency.ts';
import { counter } from '../metrics.ts';
import {
  RECORD_BYTES,
  decodeSamples,
  encodeSample,
  encodeSamples,
  mergeSamples,
  type Sample,
} from './samples.ts';

const MINUTE_MS = 60_000;
const DAY_MINUTES = 24 * 60;
/** How long samples are kept; older ones are dropped when a file is rewritten. */
export const HISTORY_DAYS = 30;
/** The resolution of samples older than a day (the last day keeps each report's sample). */
export const COARSE_MINUTES = 5;
/** How often waiting samples are appended: what a crash of the controller may lose. */
export const HISTORY_FLUSH_MS = MINUTE_MS;
/** A report is one per session per minute; more waiting than this (a disk refusing writes) drops the oldest. */
const PENDING_PER_SESSION = 120;
/** Files appended to at once. */
const FLUSH_CONCURRENCY = 16;
/** Files rewritten per flush at most: the daily rewrite spreads over the day. */
const REWRITES_PER_FLUSH = 64;
/** A counter read more than this after the one before gives no traffic sample: it would all land in one minute. */
const COUNTER_GAP_MS = 10 * MINUTE_MS;

const writeFailures = counter({
  name: 'peerops_history_write_failures_total',
  help: 'Session history appends or rewrites that failed (the samples stay in memory, bounded, and are retried)',
});

/** What a report says of one session, and the counters of the report before it. */
export interface ReportedSample {
  rtt: number | null;
  rxBytes: number;
  txBytes: number;
  routesImported: number;
  routesExported?: number;
}

export interface PreviousCounters {
  rxBytes: number;
  txBytes: number;
  /** ISO time of that report. */
  at: string;
}

export interface SessionHistoryOptions {
  dataDir: string;
  log?: FastifyBaseLogger;
  /** The clock (the benchmark's days pass faster). */
  now?: () => number;
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Bytes moved since the previous report; a counter that went back started again (a new interface). */
function delta(
  current: number,
  previous: PreviousCounters | undefined,
  key: 'rxBytes' | 'txBytes',
  nowMs: number,
) {
  if (!previous || nowMs - Date.parse(previous.at) > COUNTER_GAP_MS) return null;
  return current >= previous[key] ? current - previous[key] : current;
}

export class SessionHistory {
  private readonly dir: string;
  private readonly log: FastifyBaseLogger | undefined;
  private readonly now: () => number;
  private readonly pending = new Map<string, Sample[]>();
  /** When each file is next rewritten (Unix ms); a file seen first after a start gets a random time in the next day. */
  private readonly rewriteAt = new Map<string, number>();
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastSweep = 0;
  private failureLogged = false;

  constructor(opts: SessionHistoryOptions) {
    this.dir = join(opts.dataDir, 'history');
    this.log = opts.log;
    this.now = opts.now ?? Date.now;
  }

  /** Appends waiting samples every HISTORY_FLUSH_MS until close. */
  start(): void {
    this.timer = setInterval(() => void this.flush(), HISTORY_FLUSH_MS).unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  /** Takes one session's reported sample (the API checked the uuid is the reporting router's session). */
  record(uuid: string, reported: ReportedSample, previous: PreviousCounters | undefined): void {
    if (!uuidPattern.test(uuid)) throw new Error(`not a session uuid: ${uuid}`);
    const nowMs = this.now();
    const sample: Sample = {
      minute: Math.floor(nowMs / MINUTE_MS),
      rtt: reported.rtt,
      rxBytes: delta(reported.rxBytes, previous, 'rxBytes', nowMs),
      txBytes: delta(reported.txBytes, previous, 'txBytes', nowMs),
      routesImported: reported.routesImported,
      routesExported: reported.routesExported ?? null,
    };
    let waiting = this.pending.get(uuid);
    if (!waiting) this.pending.set(uuid, (waiting = []));
    waiting.push(sample);
    if (waiting.length > PENDING_PER_SESSION) waiting.shift();
  }

  /** The session's samples from `fromMinute` on, merged to `stepMinutes`, waiting ones included. */
  async series(uuid: string, fromMinute: number, stepMinutes: number): Promise<Sample[]> {
    if (!uuidPattern.test(uuid)) return [];
    const stored = await readFile(this.path(uuid)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return Buffer.alloc(0);
      throw err;
    });
    const waiting = (this.pending.get(uuid) ?? []).filter((s) => s.minute >= fromMinute);
    return mergeSamples([...decodeSamples(stored, fromMinute), ...waiting], stepMinutes);
  }

  /** Appends every waiting sample, rewrites the files due, and once a day removes files past the 30 days. */
  flush(): Promise<void> {
    this.flushing ??= this.flushOnce().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private path(uuid: string): string {
    return join(this.dir, `${uuid}.hist`);
  }

  private async flushOnce(): Promise<void> {
    const nowMs = this.now();
    // the samples as they are now: reports recorded during the appends wait for the next flush
    const batch = [...this.pending].map(([uuid, samples]) => [uuid, [...samples]] as const);
    if (batch.length === 0 && nowMs - this.lastSweep < DAY_MINUTES * MINUTE_MS) return;
    try {
      await mkdir(this.dir, { recursive: true });
    } catch (err) {
      return this.failed(err);
    }
    let rewrites = 0;
    await mapLimit(batch, FLUSH_CONCURRENCY, async ([uuid, samples]) => {
      try {
        await this.append(uuid, samples);
        // the samples appended are no longer waiting; ones recorded meanwhile stay
        const appended = new Set(samples);
        const left = this.pending.get(uuid)?.filter((sample) => !appended.has(sample)) ?? [];
        if (left.length === 0) this.pending.delete(uuid);
        else this.pending.set(uuid, left);
        let due = this.rewriteAt.get(uuid);
        if (due === undefined) this.rewriteAt.set(uuid, (due = nowMs + randomInt(DAY_MINUTES) * MINUTE_MS));
        if (due <= nowMs && rewrites < REWRITES_PER_FLUSH) {
          rewrites++;
          await this.rewrite(uuid, nowMs);
          this.rewriteAt.set(uuid, nowMs + DAY_MINUTES * MINUTE_MS);
        }
      } catch (err) {
        this.failed(err);
      }
    });
    if (nowMs - this.lastSweep >= DAY_MINUTES * MINUTE_MS) {
      this.lastSweep = nowMs;
      await this.sweep(nowMs).catch((err: unknown) => this.failed(err));
    }
  }

  /** Appends whole records; a partial record a crash left at the end is cut first. */
  private async append(uuid: string, samples: readonly Sample[]): Promise<void> {
    const handle = await open(this.path(uuid), 'a');
    try {
      const { size } = await handle.stat();
      if (size % RECORD_BYTES !== 0) await handle.truncate(size - (size % RECORD_BYTES));
      const bytes = Buffer.allocUnsafe(samples.length * RECORD_BYTES);
      samples.forEach((s, i) => encodeSample(s, bytes, i * RECORD_BYTES));
      await handle.write(bytes);
    } finally {
      await handle.close();
    }
  }

  /** The file again, samples older than a day merged to COARSE_MINUTES, those past HISTORY_DAYS left out. */
  async rewrite(uuid: string, nowMs = this.now()): Promise<void> {
    const nowMinute = Math.floor(nowMs / MINUTE_MS);
    const samples = decodeSamples(await readFile(this.path(uuid)), nowMinute - HISTORY_DAYS * DAY_MINUTES);
    const fineFrom = nowMinute - DAY_MINUTES;
    // merged at the 5-minute boundary before the day's: no span is half fine, half merged
    const boundary = fineFrom - (fineFrom % COARSE_MINUTES);
    const old = mergeSamples(
      samples.filter((s) => s.minute < boundary),
      COARSE_MINUTES,
    );
    const recent = samples.filter((s) => s.minute >= boundary);
    await atomicWriteFile(this.path(uuid), encodeSamples([...old, ...recent]));
  }

  /** Removes the files of sessions with no sample in the last HISTORY_DAYS (deleted ones, long silent ones). */
  private async sweep(nowMs: number): Promise<void> {
    const names = await readdir(this.dir);
    for (const name of names) {
      if (!name.endsWith('.hist')) continue;
      const path = join(this.dir, name);
      const { mtimeMs } = await stat(path);
      if (nowMs - mtimeMs > HISTORY_DAYS * DAY_MINUTES * MINUTE_MS) await unlink(path).catch(() => undefined);
    }
  }

  private failed(err: unknown): void {
    writeFailures.inc();
    // once per start: a disk refusing writes would otherwise log every minute for every session
    if (this.failureLogged) return;
    this.failureLogged = true;
    this.log?.warn(
      { err: (err as Error).message },
      'session history not written; samples stay in memory (bounded) and are retried each minute',
    );
  }
}
