/**
 * The session history's files (controller/history/session-history.ts; docs/store.md, Session history) on
 * a real disk with a clock the test moves: the 16-bit byte counts, a record cut by a crash, the daily
 * rewrite (a day of minutes kept, older ones merged to 5 minutes, past 30 days dropped) and its size per
 * session-day, and a disk that refuses writes (a tmpfs remounted read-only): the samples wait in memory.
 */
import { execFile } from 'node:child_process';
import { appendFile, mkdir, mkdtemp, rm, stat, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SessionHistory } from '../../controller/history/session-history.ts';
import { decodeCount, encodeCount, RECORD_BYTES } from '../../controller/history/samples.ts';
import { register } from '../../controller/metrics.ts';

const run = promisify(execFile);

const UUID = '0b6f3c1e-8a4d-4e2f-9c7b-1d2e3f4a5b6c';
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

let dir: string;
let clock: number;
let history: SessionHistory;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-history-files-'));
  clock = Date.UTC(2026, 0, 31, 0, 0);
  history = new SessionHistory({ dataDir: dir, now: () => clock });
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

/** A report every minute for `minutes`, 1 MiB each way per minute. */
async function reportFor(minutes: number): Promise<void> {
  for (let i = 0; i < minutes; i++) {
    const counter = (clock / MINUTE) * 1024 * 1024;
    history.record(
      UUID,
      { rtt: 12.5, rxBytes: counter, txBytes: counter, routesImported: 4, routesExported: 1500 },
      {
        rxBytes: counter - 1024 * 1024,
        txBytes: counter - 1024 * 1024,
        at: new Date(clock - MINUTE).toISOString(),
      },
    );
    clock += MINUTE;
    if (i % 60 === 59) await history.flush();
  }
  await history.flush();
}

const nowMinute = () => Math.floor(clock / MINUTE);

describe('session history files', () => {
  it('counts bytes exactly below 2,048 and within 0.05 % up to terabytes', () => {
    for (const n of [0, 1, 2047, 2048, 123_456, 10 ** 9, 3.7e12]) {
      const back = decodeCount(encodeCount(n));
      expect(Math.abs(back - n)).toBeLessThanOrEqual(n * 0.0005);
      expect(encodeCount(n)).not.toBe(0xffff);
    }
  });

  it('drops a record a crash cut, and appends whole ones after it', async () => {
    await reportFor(3);
    await appendFile(join(dir, 'history', `${UUID}.hist`), Buffer.from([1, 2, 3]));
    expect(await history.series(UUID, 0, 1)).toHaveLength(3);
    await reportFor(2);
    const points = await history.series(UUID, 0, 1);
    expect(points).toHaveLength(5);
    expect(points.every((p) => p.rxBytes === 1024 * 1024 && p.routesExported === 1500)).toBe(true);
  });

  it('keeps a report recorded while a flush appends for the next flush', async () => {
    const sample = { rtt: 5, rxBytes: 0, txBytes: 0, routesImported: 1, routesExported: 2 };
    history.record(UUID, sample, undefined);
    const flushing = history.flush();
    clock += MINUTE;
    history.record(UUID, sample, undefined);
    await flushing;
    await history.flush();
    const file = join(dir, 'history', `${UUID}.hist`);
    expect((await stat(file)).size).toBe(2 * RECORD_BYTES);
  });

  it('keeps the last day by the minute, merges older days to 5 minutes and drops those past 30', async () => {
    await reportFor(3 * 24 * 60);
    const file = join(dir, 'history', `${UUID}.hist`);
    // the flushes rewrite each file once a day, at a random time after a start: three days of
    // minutes never stay
    expect((await stat(file)).size).toBeLessThan(3 * 24 * 60 * RECORD_BYTES);
    await history.rewrite(UUID, clock);
    const fine = await history.series(UUID, nowMinute() - 24 * 60, 1);
    expect(fine.length).toBeGreaterThanOrEqual(24 * 60);
    const older = await history.series(UUID, 0, 1);
    const coarse = older.filter((p) => p.minute < nowMinute() - 24 * 60 - 5);
    expect(coarse.every((p) => p.minute % 5 === 0 && p.rxBytes === 5 * 1024 * 1024)).toBe(true);
    // a coarse day: 288 records, under the 4 KiB target
    const size = (await stat(file)).size;
    const perCoarseDay = (size - fine.length * RECORD_BYTES) / 2;
    expect(perCoarseDay).toBeLessThanOrEqual(4096);

    clock += 31 * DAY;
    await history.rewrite(UUID, clock);
    expect((await stat(file)).size).toBe(0);
  });

  it('removes a file with nothing newer than 30 days on its daily sweep', async () => {
    await reportFor(1);
    const file = join(dir, 'history', `${UUID}.hist`);
    const old = new Date(clock - 31 * DAY);
    await utimes(file, old, old);
    // the first flush of a start sweeps
    const fresh = new SessionHistory({ dataDir: dir, now: () => clock });
    await fresh.flush();
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
  });

  it('keeps the samples in memory while the disk refuses writes, and writes them once it takes them', async () => {
    // a tmpfs remounted read-only: root writes anywhere else (mounting needs root, as the namespace tests)
    const mnt = join(dir, 'mnt');
    await mkdir(mnt);
    await run('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mnt]);
    try {
      await run('mount', ['-o', 'remount,ro', mnt]);
      const onDisk = new SessionHistory({ dataDir: mnt, now: () => clock });
      const failures = async () =>
        (await register.getSingleMetric('peerops_history_write_failures_total')?.get())?.values[0]?.value ??
        0;
      const before = await failures();
      onDisk.record(UUID, { rtt: 7, rxBytes: 0, txBytes: 0, routesImported: 1 }, undefined);
      await onDisk.flush();
      expect(await failures()).toBe(before + 1);
      expect(await onDisk.series(UUID, 0, 1)).toMatchObject([{ rtt: 7, routesExported: null }]);
      await run('mount', ['-o', 'remount,rw', mnt]);
      await onDisk.flush();
      expect((await stat(join(mnt, 'history', `${UUID}.hist`))).size).toBe(RECORD_BYTES);
      expect(await onDisk.series(UUID, 0, 1)).toHaveLength(1);
    } finally {
      await run('umount', ['-l', mnt]);
    }
  });
});
