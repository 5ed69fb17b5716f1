/**
 * Session history benchmark, part of `npm run bench:lg` (docs/benchmarks.md, "Session history"):
 *
 * - storage per session-day: HISTORY_SIZE_SESSIONS sessions report once a minute for a day through the
 *   history (controller/history/session-history.ts) with its clock moved by the benchmark, flushed as
 *   the controller flushes; a day later each file is rewritten as the daily rewrite does (the day merged
 *   to 5 minutes), and its size is that session-day's. Target <= 4 KiB.
 * - the 30-day graph query of one session among HISTORY_SESSIONS (10,000) sessions' files, each holding
 *   30 days (29 merged, the last by the minute, as a file is just before its daily rewrite): the
 *   route's work (read the file, decode, merge to 30-minute points, encode the answer) for sessions
 *   picked at random. The files were just written, so they are in the page cache, as a controller's
 *   recent ones are. Target p99 < 50 ms.
 *
 * Usage: node scripts/bench-lg-history.ts [SESSIONS [QUERIES]] (default 10000, 500); also the end of
 * bench:lg. Prints the load average beside the figures: the machine may be shared.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { COARSE_MINUTES, SessionHistory } from '../controller/history/session-history.ts';
import { encodeSamples, type Sample } from '../controller/history/samples.ts';
import { percentile, verdict } from './bench-api/harness.ts';

const TARGET_BYTES_PER_SESSION_DAY = 4096;
const TARGET_QUERY_P99_MS = 50;
const HISTORY_SIZE_SESSIONS = 50;
const MINUTE = 60_000;
const DAY_MINUTES = 24 * 60;

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** A session's report at minute `m`: RTT around 30 ms, 0.1–5 MB a minute, a DN42 table's export. */
function report(m: number, seed: number) {
  const wave = Math.sin((m + seed) / 97);
  return {
    rtt: m % 53 === 0 ? null : 30 + 20 * wave + (seed % 7),
    perMinute: Math.round(100_000 + 4_900_000 * Math.abs(wave)),
    routesImported: 3 + (seed % 20),
    routesExported: 1480 + (m % 240 === 0 ? 1 : 0),
  };
}

async function storagePerSessionDay(): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'peerops-bench-history-'));
  try {
    let clock = Date.UTC(2026, 0, 1);
    const history = new SessionHistory({ dataDir: dir, now: () => clock });
    const sessions = Array.from({ length: HISTORY_SIZE_SESSIONS }, () => randomUUID());
    const counters = new Map(sessions.map((u) => [u, 0]));
    for (let m = 0; m < DAY_MINUTES; m++) {
      sessions.forEach((uuid, seed) => {
        const r = report(m, seed);
        const before = counters.get(uuid) ?? 0;
        counters.set(uuid, before + r.perMinute);
        history.record(
          uuid,
          {
            rtt: r.rtt,
            rxBytes: before + r.perMinute,
            txBytes: before + r.perMinute,
            routesImported: r.routesImported,
            routesExported: r.routesExported,
          },
          { rxBytes: before, txBytes: before, at: new Date(clock - MINUTE).toISOString() },
        );
      });
      clock += MINUTE;
      await history.flush();
    }
    clock += DAY_MINUTES * MINUTE;
    for (const uuid of sessions) await history.rewrite(uuid, clock);
    const files = await readdir(join(dir, 'history'));
    let total = 0;
    for (const f of files) total += (await stat(join(dir, 'history', f))).size;
    return total / files.length;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A file as it is before its daily rewrite: 29 days at 5 minutes, the last day by the minute. */
function thirtyDays(nowMinute: number): Buffer {
  const samples: Sample[] = [];
  const fineFrom = nowMinute - DAY_MINUTES;
  for (let m = nowMinute - 30 * DAY_MINUTES; m < nowMinute; m += m < fineFrom ? COARSE_MINUTES : 1) {
    const r = report(m, 1);
    const span = m < fineFrom ? COARSE_MINUTES : 1;
    samples.push({
      minute: m,
      rtt: r.rtt,
      rxBytes: r.perMinute * span,
      txBytes: r.perMinute * span,
      routesImported: r.routesImported,
      routesExported: r.routesExported,
    });
  }
  return encodeSamples(samples);
}

export async function benchHistory(sessions = 10_000, queries = 500): Promise<void> {
  const perDay = await storagePerSessionDay();
  console.log(
    `session history storage, ${HISTORY_SIZE_SESSIONS} sessions reporting each minute for a day, merged as the daily rewrite does:\n` +
      `  ${perDay.toFixed(0)} B per session-day (the last 24 h by the minute: ${DAY_MINUTES * 14} B more per session) (load ${load()})\n` +
      `target <= ${TARGET_BYTES_PER_SESSION_DAY} B: ${verdict(perDay <= TARGET_BYTES_PER_SESSION_DAY)}`,
  );

  const dir = await mkdtemp(join(tmpdir(), 'peerops-bench-history-'));
  try {
    const nowMinute = Math.floor(Date.now() / MINUTE);
    const content = thirtyDays(nowMinute);
    await mkdir(join(dir, 'history'));
    const uuids = Array.from({ length: sessions }, () => randomUUID());
    const t0 = performance.now();
    for (const uuid of uuids) await writeFile(join(dir, 'history', `${uuid}.hist`), content);
    const written = performance.now() - t0;
    const history = new SessionHistory({ dataDir: dir });
    const query = async (uuid: string) => {
      const t = performance.now();
      const points = await history.series(uuid, nowMinute - 30 * DAY_MINUTES, 30);
      const json = JSON.stringify({
        uuid,
        range: '30d',
        stepSeconds: 1800,
        points: points.map((p) => ({ ...p, at: new Date(p.minute * MINUTE).toISOString() })),
      });
      if (points.length < 1400 || json.length < 1000)
        throw new Error(`30-day query: ${points.length} points`);
      return performance.now() - t;
    };
    for (let i = 0; i < 20; i++) await query(uuids[i] ?? ''); // warm-up
    const times: number[] = [];
    for (let i = 0; i < queries; i++)
      times.push(await query(uuids[Math.floor(Math.random() * uuids.length)] ?? ''));
    times.sort((a, b) => a - b);
    const p99 = percentile(times, 99);
    console.log(
      `session history, the 30-day graph query of one session among ${sessions} sessions' files (${content.length} B each, written in ${(written / 1000).toFixed(1)} s), ${queries} queries:\n` +
        `  p50 ${percentile(times, 50).toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, max ${times.at(-1)?.toFixed(2)} ms (load ${load()})\n` +
        `target p99 < ${TARGET_QUERY_P99_MS} ms: ${verdict(p99 < TARGET_QUERY_P99_MS)}`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await benchHistory(Number(process.argv[2] ?? 10_000), Number(process.argv[3] ?? 500));
