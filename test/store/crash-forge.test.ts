/**
 * The git store following a forge in the synchronous push mode (docs/gitops.md, "Push modes") under
 * SIGKILL: a real `peerops serve` against `git http-backend` on loopback takes creates, approvals,
 * modifies and deletes from several clients at once and is killed at random instants, again and again.
 * Every other restart is on a new, empty data directory (a lost disk: everything comes from the forge),
 * the others on the same one. After each:
 * - every acknowledged write is served, and one without an answer is there whole or not at all;
 * - the forge's repository passes `git fsck --full` once no push is landing on it.
 * It prints the counts: kills, acknowledged writes, writes without an answer, lost (must be 0).
 * CRASH_FORGE_KILLS sets the number of kills (default 10, about 40 s here).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControllerProcess } from '../support/controller-process.ts';
import { ForgeRig, judge, sessionsFor, writer, type Counts } from '../gitops/forge-rig.ts';

const KILLS = Number(process.env.CRASH_FORGE_KILLS ?? 10);
const WORKERS = 4;

const rig = new ForgeRig();
let current: { proc: ControllerProcess; data: string } | undefined;

beforeAll(async () => {
  await rig.open();
}, 30_000);

afterAll(async () => {
  await current?.proc.kill();
  await rig.close();
});

describe('git store with a forge, synchronous push: SIGKILL during a stream of writes', () => {
  it(`loses no acknowledged write across ${KILLS} kills, half of them with the disk lost`, async () => {
    current = await rig.controller('sync');
    await current.proc.start();
    await rig.network(current.proc);
    const sessions = sessionsFor(WORKERS, 6, 4242423000);
    const all = sessions.flat();
    const counts: Counts = { acked: 0, unanswered: 0, latencies: [] };
    let lost = 0;
    let freshStarts = 0;
    for (let kill = 1; kill <= KILLS; kill++) {
      const stop = { now: false };
      const proc = current.proc;
      const workers = sessions.map((mine, w) => writer(rig, () => proc, w, mine, stop, counts));
      // kill at a random instant once the stream is flowing, mid-request
      const flowing = counts.acked + 3;
      for (let t = 0; counts.acked < flowing && t < 300; t++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, Math.random() * 1000));
      await proc.kill();
      stop.now = true;
      await Promise.all(workers);

      if (kill % 2 === 1) {
        current = await rig.controller('sync');
        freshStarts++;
      }
      await current.proc.start();
      await rig.caughtUp(current.proc, current.data);
      const missing = judge(all, await rig.served(current.proc));
      lost += missing.length;
      expect(
        missing.map(
          (s) =>
            `AS${s.asn}: acknowledged ${JSON.stringify(s.acked)}, in flight ${JSON.stringify(s.inflight)}`,
        ),
        `after kill ${kill}`,
      ).toEqual([]);
      expect(await rig.fsck(), `git fsck of the forge after kill ${kill}`).toBe('');
    }
    console.log(
      `crash test with a forge (sync push): ${KILLS} kills (${freshStarts} on an empty data directory), ` +
        `${counts.acked} acknowledged writes, ${counts.unanswered} without an answer, lost ${lost}`,
    );
    expect(lost).toBe(0);
    expect(counts.acked).toBeGreaterThanOrEqual(KILLS * 3);
  }, 300_000);
});
