/**
 * The push modes with a forge (docs/gitops.md, "Push modes"), with real `peerops serve` processes against
 * `git http-backend` on loopback (forge-rig.ts):
 * - sync: clients write, the controller is SIGKILLed mid-stream, and a fresh controller on an empty data
 *   directory (the documented recovery of a lost disk) serves every acknowledged write from the forge
 *   alone; with the forge down (answering 500, then never answering) a write is answered 503
 *   FORGE_UNAVAILABLE within the wait and nothing of it is applied; back up, writes go through and are on
 *   the forge when answered.
 * - async: the same kill and fresh start: what was lost is counted and printed, and every lost write was
 *   acknowledged within the documented window before the kill.
 * The write latency of each mode is printed. PUSH_MODES_STREAM_MS sets how long the clients write before
 * the kill (default 6000).
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ControllerProcess } from '../support/controller-process.ts';
import { ForgeRig, judge, percentile, sessionsFor, writer, type Counts, type Tracked } from './forge-rig.ts';

const run = promisify(execFile);
const STREAM_MS = Number(process.env.PUSH_MODES_STREAM_MS ?? 6000);
const WAIT_S = 2;
/** The async mode's documented window: the fetch interval (PEEROPS_GIT_INTERVAL, default 5 s). */
const ASYNC_WINDOW_MS = 5000;

const rig = new ForgeRig();
let fresh: { proc: ControllerProcess; data: string } | undefined;
const started: ControllerProcess[] = [];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function start(mode: 'sync' | 'async', extra: string[] = []) {
  const c = await rig.controller(mode, extra);
  started.push(c.proc);
  await c.proc.start();
  return c;
}

/** Clients write for about STREAM_MS, then the controller is killed mid-request; when it died. */
async function streamThenKill(c: ControllerProcess, sessions: Tracked[][], counts: Counts): Promise<number> {
  const stop = { now: false };
  const workers = sessions.map((mine, w) => writer(rig, () => c, w, mine, stop, counts));
  await sleep(STREAM_MS * (0.7 + 0.3 * Math.random()));
  await c.kill();
  const killedAt = Date.now();
  stop.now = true;
  await Promise.all(workers);
  return killedAt;
}

const onForge = (path: string, ref = 'main') =>
  run('git', ['--git-dir', rig.upstream, 'show', `${ref}:${path}`]).then(
    (r) => r.stdout,
    () => undefined,
  );

beforeAll(async () => {
  await rig.open();
}, 30_000);

afterAll(async () => {
  for (const c of started) await c.kill();
  await rig.close();
});

describe('push modes with a forge', () => {
  it('sync: a fresh controller from the forge alone serves every acknowledged write after a kill', async () => {
    const a = await start('sync');
    await rig.network(a.proc);
    const sessions = sessionsFor(4, 6, 4242421000);
    const counts: Counts = { acked: 0, unanswered: 0, latencies: [] };
    await streamThenKill(a.proc, sessions, counts);

    fresh = await start('sync', ['--git-push-timeout', String(WAIT_S)]);
    await rig.caughtUp(fresh.proc, fresh.data);
    const lost = judge(sessions.flat(), await rig.served(fresh.proc));
    console.log(
      `sync push: ${counts.acked} acknowledged writes, ${counts.unanswered} unanswered at the kill; ` +
        `a fresh controller from the forge lost ${lost.length}; write latency p50 ${percentile(counts.latencies, 0.5)} ms, ` +
        `p99 ${percentile(counts.latencies, 0.99)} ms`,
    );
    expect(lost.map((s) => `AS${s.asn}: acked ${JSON.stringify(s.acked)}`)).toEqual([]);
    expect(counts.acked).toBeGreaterThanOrEqual(5);
  }, 90_000);

  it('sync: the forge down answers 503 FORGE_UNAVAILABLE within the wait, applies nothing; back up, writes go through', async () => {
    const c = (fresh as { proc: ControllerProcess }).proc;
    const [target] = [...(await rig.served(c)).values()].filter((s) => s.status === 3 || s.status === 4);
    if (!target) throw new Error('no session to modify');
    const asn = 4242429001;
    const create = () =>
      c.post(rig.userToken(asn), '/session', {
        action: 'create',
        router: 'fra1',
        ipv6: 'fd42:9001::1',
        linkLocal: 'fe80::9001',
        publicKey: randomBytes(32).toString('base64'),
      });
    const modify = (mtu: number) =>
      c.post(rig.userToken(target.asn), '/session', { action: 'modify', uuid: target.uuid, mtu });
    const newMtu = target.mtu === 1300 ? 1301 : 1300;
    for (const down of ['failing', 'hanging'] as const) {
      rig.forge[down] = true;
      onTestFinished(() => {
        rig.forge[down] = false;
      });
      for (const write of [create, () => modify(newMtu)]) {
        const t0 = Date.now();
        const answer = await write();
        const ms = Date.now() - t0;
        expect(answer.status, JSON.stringify(answer.body)).toBe(503);
        expect(answer.body.code).toBe('FORGE_UNAVAILABLE');
        expect(answer.body.detail).toMatch(/nothing of this write was applied/);
        expect(ms).toBeLessThan(WAIT_S * 1000 + 1500);
        console.log(`sync push, forge ${down}: 503 FORGE_UNAVAILABLE after ${ms} ms`);
      }
      const served = await rig.served(c);
      expect(served.has(asn)).toBe(false);
      expect(served.get(target.asn)?.mtu).toBe(target.mtu);
      rig.forge[down] = false;
    }
    expect(c.output).toContain('cannot sync with the remote');
    expect(await (await fetch(`${c.base}/metrics`)).text()).toMatch(
      /^peerops_git_sync_push_refused_total\{reason="unavailable"\} 4$/m,
    );
    // nothing of them reached the forge, on either branch, once it answers again
    await sleep(1500);
    expect(await onForge(`sessions/fra1/as${asn}.yaml`)).toBeUndefined();
    expect(await onForge(`sessions/fra1/as${asn}.yaml`, 'peerops-status')).toBeUndefined();

    // back up: answered once on the forge, so the forge holds it the moment the answer arrives
    const created = await create();
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(await onForge(`sessions/fra1/as${asn}.yaml`)).toContain(String(created.body.uuid));
    expect(await onForge(`sessions/fra1/as${asn}.yaml`, 'peerops-status')).toContain('code: 3');
    const modified = await modify(newMtu);
    expect(modified.status, JSON.stringify(modified.body)).toBe(200);
    expect(await onForge(`sessions/${target.router}/as${target.asn}.yaml`)).toContain(`mtu: ${newMtu}`);
  }, 60_000);

  it('sync: a forge edit of the same manifest landing before the push answers 409 FORGE_CONFLICT, the forge wins', async () => {
    const c = (fresh as { proc: ControllerProcess }).proc;
    const [target] = [...(await rig.served(c)).values()].filter((s) => s.status === 3 || s.status === 4);
    if (!target) throw new Error('no session to modify');
    const path = `sessions/${target.router}/as${target.asn}.yaml`;
    const work = join(rig.root, 'person');
    await run('git', ['clone', '-q', rig.url, work]);
    const git = (...args: string[]) =>
      run('git', ['-C', work, '-c', 'user.name=Reviewer', '-c', 'user.email=r@example.net', ...args]);
    // a person's edit of the same session lands on the forge right before the controller's push arrives
    let raced = false;
    rig.forge.before = async (req) => {
      if (raced || req.method !== 'POST' || !req.url?.includes('git-receive-pack')) return;
      raced = true;
      await git('pull', '-q', '--rebase', 'origin', 'main');
      const text = await readFile(join(work, path), 'utf8');
      await writeFile(join(work, path), text.replace(/mtu: \d+/, 'mtu: 1444'));
      await git('commit', '-q', '-am', 'Merge pull request #9: MTU 1444');
      await git('push', '-q', 'origin', 'main');
    };
    onTestFinished(() => {
      rig.forge.before = undefined;
    });
    const answer = await c.post(rig.userToken(target.asn), '/session', {
      action: 'modify',
      uuid: target.uuid,
      mtu: 1333,
    });
    expect(raced).toBe(true);
    expect(answer.status, JSON.stringify(answer.body)).toBe(409);
    expect(answer.body.code).toBe('FORGE_CONFLICT');
    expect(await (await fetch(`${c.base}/metrics`)).text()).toMatch(
      /^peerops_git_sync_push_refused_total\{reason="conflict"\} 1$/m,
    );
    // nothing of the refused write: the forge's edit is what the forge holds and the controller serves
    expect(await onForge(path)).toContain('mtu: 1444');
    expect((await rig.served(c)).get(target.asn)?.mtu).toBe(1444);
    // and a write right after goes through
    const again = await c.post(rig.userToken(target.asn), '/session', {
      action: 'modify',
      uuid: target.uuid,
      mtu: 1333,
    });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await onForge(path)).toContain('mtu: 1333');
    // one controller per forge: the next test's take over
    await c.kill();
  }, 60_000);

  it('async: a fresh controller from the forge loses only writes of the documented window', async () => {
    const c = await start('async');
    await rig.caughtUp(c.proc, c.data);
    const sessions = sessionsFor(4, 6, 4242422000);
    const counts: Counts = { acked: 0, unanswered: 0, latencies: [] };
    const killedAt = await streamThenKill(c.proc, sessions, counts);

    const d = await start('async');
    await rig.caughtUp(d.proc, d.data);
    const lost = judge(sessions.flat(), await rig.served(d.proc));
    const ages = lost.map((s) => killedAt - s.ackedAt);
    console.log(
      `async push: ${counts.acked} acknowledged writes; a fresh controller from the forge lost ${lost.length}, ` +
        `acknowledged at most ${Math.max(0, ...ages)} ms before the kill (window ${ASYNC_WINDOW_MS} ms); ` +
        `write latency p50 ${percentile(counts.latencies, 0.5)} ms, p99 ${percentile(counts.latencies, 0.99)} ms`,
    );
    for (const age of ages) expect(age).toBeLessThanOrEqual(ASYNC_WINDOW_MS);
    expect(counts.acked).toBeGreaterThanOrEqual(5);
  }, 90_000);
});
