/**
 * The git store under SIGKILL (docs/store.md, "Crash safety"): a real `peerops serve` takes a stream of
 * creates, approvals, modifies, agent reports and deletes from several clients at once and is killed at
 * random instants, mid-request, again and again. After each restart:
 * - every acknowledged write is there, and an unacknowledged one is there whole or not at all;
 * - spec and status agree (the same sessions on both refs, the same uuid), `git fsck --full` is clean;
 * - no lock is left behind, a write goes through at once, and the controller logged what it cleaned.
 * An admin's hook records every event delivered (docs/notifications.md, "The outbox"): after the last
 * restart each acknowledged transition's event has reached it at least once.
 * It prints the counts: kills, acknowledged writes, writes in flight at a kill, lost (must be 0), and the
 * events expected, delivered, repeated, lost (must be 0).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { transition } from '../../common/state-machine.ts';
import type { SessionStatusCode } from '../../common/status.ts';
import { freePort } from '../support/ports.ts';
import { ControllerProcess, type Answer } from '../support/controller-process.ts';
import { routerFields } from '../api/helpers.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { startReceiver, type Receiver } from '../notify/receiver.ts';

const run = promisify(execFile);
const KILLS = Number(process.env.CRASH_KILLS ?? 22);
const WORKERS = 6;
const ADMIN_ASN = 4242420000;

/** What a session must look like: its status code and MTU (deleted: undefined). */
interface State {
  status: number;
  mtu: number;
}

interface Tracked {
  uuid?: string;
  asn: number;
  router: string;
  /** The last acknowledged state; undefined: not created yet, or removed. */
  acked: State | undefined;
  /** A write whose answer never came (the controller died): its whole result, or the same as acked. */
  inflight?: { result: State | undefined; op: string };
}

let dir: string;
let controller: ControllerProcess;
let receiver: Receiver;
/** The events each acknowledged transition must bring, by session uuid and type: how many. */
const expectedEvents = new Map<string, number>();
let issuer: TokenIssuer;
const agentTokens = new Map<string, string>();
const call = (token: string, path: string, body: unknown) => controller.post(token, path, body);

const userToken = (asn: number) => issuer.issueToken(asn, 'user').token;
const adminToken = (worker: number) => issuer.issueToken(ADMIN_ASN + worker, 'admin').token;

/** The result of a trigger on a state, by the product's own state machine. */
function after(state: State, trigger: Parameters<typeof transition>[1], mtu = state.mtu): State | undefined {
  const outcome = transition(state.status as SessionStatusCode, trigger);
  return outcome.result === 'removed' ? undefined : { status: outcome.to, mtu };
}

/** The events of a session's move from `from` to `to` (docs/notifications.md, Events), read independently. */
function eventsOf(from: State | undefined, to: State | undefined): string[] {
  if (from === undefined) return to ? ['session.created', 'session.pending_review'] : [];
  if (to === undefined) return ['session.deleted'];
  if (from.status === to.status) return [];
  if (from.status === 3 && to.status === 4) return ['session.approved'];
  return { 1: ['session.active'], 2: ['session.error'], 6: ['session.setup_failed'] }[to.status] ?? [];
}

/** An acknowledged transition of the session with this uuid: its events are expected. */
function expectEvents(uuid: string, from: State | undefined, to: State | undefined): void {
  for (const type of eventsOf(from, to))
    expectedEvents.set(`${uuid} ${type}`, (expectedEvents.get(`${uuid} ${type}`) ?? 0) + 1);
}

/** One client: a sequence of writes on its own sessions, one request at a time, until `stop`. */
async function worker(
  id: number,
  sessions: Tracked[],
  stop: { now: boolean },
  counts: Counts,
): Promise<void> {
  const admin = adminToken(id);
  while (!stop.now) {
    // a session whose last write got no clear answer waits for the judgement after the next restart
    const open = sessions.filter((t) => !t.inflight);
    if (open.length === 0) return;
    const s = open[Math.floor(Math.random() * open.length)] as Tracked;
    let op: string;
    let request: () => Promise<Answer>;
    let result: State | undefined;
    const state = s.acked;
    if (!state) {
      op = 'create';
      result = { status: 3, mtu: 1420 };
      request = () =>
        call(userToken(s.asn), '/session', {
          action: 'create',
          router: s.router,
          ipv6: `fd42:${s.asn.toString(16).slice(-4)}::1`,
          linkLocal: 'fe80::1234',
          publicKey: randomBytes(32).toString('base64'),
          mtu: 1420,
        });
    } else if (state.status === 3) {
      op = 'approve';
      result = after(state, { kind: 'approve' });
      request = () => call(admin, '/admin/session', { action: 'approve', uuid: s.uuid });
    } else if (state.status === 4 || state.status === 5) {
      op = 'report';
      const reported = state.status === 4 ? 1 : 0;
      result = after(state, { kind: 'report', status: reported });
      const port = (s as Tracked & { port?: number }).port;
      request = () =>
        call(agentTokens.get(s.router) as string, `/agent/${s.router}/modify`, {
          uuid: s.uuid,
          status: reported,
          interface: `wg_${port}`,
        });
    } else if (Math.random() < 0.7) {
      op = 'modify';
      const mtu = 1280 + Math.floor(Math.random() * 140);
      // a modify repeating the session's own MTU changes nothing, its status included (docs/api.md)
      result = mtu === state.mtu ? state : after(state, { kind: 'modify' }, mtu);
      request = () => call(userToken(s.asn), '/session', { action: 'modify', uuid: s.uuid, mtu });
    } else {
      op = 'delete';
      result = after(state, { kind: 'delete' });
      request = () => call(userToken(s.asn), '/session', { action: 'delete', uuid: s.uuid });
    }
    s.inflight = { result, op };
    let answer: Answer;
    try {
      answer = await request();
    } catch {
      counts.inflightAtKill++;
      return; // killed: the outcome is judged after the restart
    }
    s.inflight = undefined;
    if (answer.status === 200) {
      // the answer says the state the model expects: a gap in the model shows here, not as a lost write
      if (result && answer.body.status !== result.status)
        throw new Error(`${op}: answered status ${String(answer.body.status)}, expected ${result.status}`);
      counts.acked++;
      if (op === 'create') {
        s.uuid = answer.body.uuid as string;
        (s as Tracked & { port?: number }).port = answer.body.listenPort as number;
      }
      expectEvents(s.uuid as string, s.acked, result);
      s.acked = result;
    } else if (answer.status === 503) {
      // STORE_UNAVAILABLE: not acknowledged; a write stopped half-way is finished by recovery
      s.inflight = { result, op };
    } else if (answer.status !== 429) {
      throw new Error(`${op}: ${answer.status} ${JSON.stringify(answer.body)}`);
    }
  }
}

interface Counts {
  acked: number;
  inflightAtKill: number;
  lost: number;
  halfApplied: number;
  cleanupsLogged: number;
  leftoversSeen: number;
}

/** What the store's refs hold: session file paths → uuid, on each ref (one git process for all blobs). */
async function refsView(gitdir: string): Promise<{ spec: Map<string, string>; status: Map<string, string> }> {
  const read = async (ref: string) => {
    const tree = await run('git', ['--git-dir', gitdir, 'ls-tree', '-r', ref, 'sessions/']).catch(() => ({
      stdout: '',
    }));
    const paths = tree.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split('\t')[1] as string);
    const out = new Map<string, string>();
    for (const path of paths) {
      const { stdout } = await run('git', ['--git-dir', gitdir, 'show', `${ref}:${path}`]);
      out.set(path, /uuid: (\S+)/.exec(stdout)?.[1] ?? '?');
    }
    return out;
  };
  return { spec: await read('main'), status: await read('peerops-status') };
}

async function leftovers(gitdir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.name.endsWith('.lock') || e.name.startsWith('tmp_obj_peerops_') || e.name === 'journal.json')
        found.push(p.slice(gitdir.length + 1));
    }
  };
  await walk(join(gitdir, 'refs'));
  await walk(join(gitdir, 'objects'));
  await walk(join(gitdir, 'peerops'));
  return found.filter((f) => f !== 'peerops/controller.lock');
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-crash-'));
  controller = new ControllerProcess(dir, await freePort());
  issuer = await TokenIssuer.fromFile(defaultKeyPath(dir));
  await controller.start();
  receiver = await startReceiver();
  const admin = adminToken(0);
  expect((await call(admin, '/admin/webhooks', { action: 'create', url: receiver.url })).status).toBe(200);
  expect((await call(admin, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).status).toBe(
    200,
  );
  for (const name of ['fra1', 'ams1']) {
    const added = await call(admin, '/admin/router', { action: 'add', ...routerFields(name) });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    agentTokens.set(name, added.body.agentToken as string);
  }
});

afterAll(async () => {
  await controller.kill();
  await receiver.close();
  await rm(dir, { recursive: true, force: true });
});

describe('git store: SIGKILL during a stream of writes', () => {
  it(`loses no acknowledged write across ${KILLS} kills, and leaves nothing half-written or locked`, async () => {
    const gitdir = join(dir, 'store.git');
    const counts: Counts = {
      acked: 0,
      inflightAtKill: 0,
      lost: 0,
      halfApplied: 0,
      cleanupsLogged: 0,
      leftoversSeen: 0,
    };
    const sessions: Tracked[][] = Array.from({ length: WORKERS }, (_, w) =>
      Array.from({ length: 8 }, (_, k) => ({
        asn: 4242421000 + w * 100 + k,
        router: k % 2 === 0 ? 'fra1' : 'ams1',
        acked: undefined,
      })),
    );
    const all = sessions.flat();
    for (let kill_ = 1; kill_ <= KILLS; kill_++) {
      const stop = { now: false };
      const workers = sessions.map((mine, w) => worker(w, mine, stop, counts));
      // kill at a random instant once the stream is flowing (a few answers in), mid-request
      const flowing = counts.acked + 3;
      for (let t = 0; counts.acked < flowing && t < 200; t++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, Math.random() * 500));
      await controller.kill();
      stop.now = true;
      await Promise.all(workers);

      const before = await leftovers(gitdir);
      if (before.length > 0) counts.leftoversSeen++;
      await controller.start();
      const log = controller.output;
      if (before.length > 0) {
        expect(log, `leftovers ${before.join(', ')} were cleaned without a word`).toMatch(
          /store: (removed|completed|dropped|took over)/,
        );
        counts.cleanupsLogged++;
      }
      // none stays: the delivery of the outbox writes at once, and a lock of a write under way is no leftover
      let left = await leftovers(gitdir);
      for (let t = 0; t < 40 && left.length > 0; t++) {
        await new Promise((r) => setTimeout(r, 50));
        left = await leftovers(gitdir);
      }
      expect(left).toEqual([]);

      // every session as the controller serves it after the restart
      const listed = await call(adminToken(0), '/admin/session', { action: 'list' });
      expect(listed.status).toBe(200);
      const served = new Map(
        (listed.body.sessions as { uuid: string; status: number; mtu: number }[]).map((s) => [s.uuid, s]),
      );
      const byAsn = new Map(
        (
          listed.body.sessions as {
            uuid: string;
            asn: number;
            status: number;
            mtu: number;
            listenPort?: number;
          }[]
        ).map((s) => [s.asn, s]),
      );
      for (const s of all) {
        const now = s.acked && s.uuid ? served.get(s.uuid) : byAsn.get(s.asn);
        const state = now ? { status: now.status, mtu: now.mtu } : undefined;
        const same = (a: State | undefined, b: State | undefined) =>
          a === undefined ? b === undefined : b !== undefined && a.status === b.status && a.mtu === b.mtu;
        if (same(state, s.acked)) {
          s.inflight = undefined;
          continue;
        }
        if (s.inflight && same(state, s.inflight.result)) {
          // the write was done though its answer never came: it counts from now on
          if (s.inflight.op === 'create' && now) {
            s.uuid = now.uuid;
            (s as Tracked & { port?: number }).port = byAsn.get(s.asn)?.listenPort;
          }
          expectEvents(s.uuid as string, s.acked, state);
          s.acked = state;
          s.inflight = undefined;
          continue;
        }
        if (s.inflight) counts.halfApplied++;
        else counts.lost++;
        throw new Error(
          `AS${s.asn}: served ${JSON.stringify(state)}, acknowledged ${JSON.stringify(s.acked)}, in flight ${JSON.stringify(s.inflight)}`,
        );
      }

      // spec and status agree, on disk
      const refs = await refsView(gitdir);
      expect([...refs.status.keys()].sort()).toEqual([...refs.spec.keys()].sort());
      for (const [path, uuid] of refs.spec) expect(refs.status.get(path), path).toBe(uuid);
      const fsck = await run('git', [
        '--git-dir',
        gitdir,
        'fsck',
        '--full',
        '--no-dangling',
        '--no-progress',
      ]);
      expect(fsck.stderr).not.toMatch(/error|missing|broken|corrupt/i);
    }
    // a write right after the last restart goes through: no lock holds it
    const t0 = Date.now();
    const policy = await call(adminToken(0), '/admin/policy', {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN },
    });
    expect(policy.status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(2000);
    console.log(
      `crash test: ${KILLS} kills, ${counts.acked} acknowledged writes, ${counts.inflightAtKill} in flight at a kill, ` +
        `${counts.leftoversSeen} restarts with leftovers (all logged: ${counts.cleanupsLogged}), lost ${counts.lost}, half-applied ${counts.halfApplied}`,
    );
    expect(counts.lost).toBe(0);
    expect(counts.acked).toBeGreaterThanOrEqual(KILLS * 3);

    // every acknowledged transition's event delivered at least once: as many distinct ids as transitions
    const missing = () => {
      const delivered = new Map<string, Set<string>>();
      for (const r of receiver.received) {
        const event = JSON.parse(r.body) as NotificationEvent;
        const key = `${event.session?.uuid} ${event.type}`;
        delivered.set(key, (delivered.get(key) ?? new Set()).add(event.id));
      }
      let lost = 0;
      for (const [key, n] of expectedEvents) lost += Math.max(0, n - (delivered.get(key)?.size ?? 0));
      return lost;
    };
    for (let t = 0; t < 600 && missing() > 0; t++) await new Promise((r) => setTimeout(r, 100));
    const expected = [...expectedEvents.values()].reduce((a, b) => a + b, 0);
    const ids = new Set(receiver.received.map((r) => (JSON.parse(r.body) as NotificationEvent).id));
    console.log(
      `crash test events: ${KILLS} kills, ${counts.acked} acknowledged writes, ${expected} events expected, ` +
        `${receiver.received.length} deliveries of ${ids.size} distinct events ` +
        `(${receiver.received.length - ids.size} repeats), lost ${missing()}`,
    );
    expect(missing()).toBe(0);
  }, 600_000);
});
