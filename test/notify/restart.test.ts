/**
 * Events survive a controller's restart (docs/notifications.md, "The outbox"): a real `peerops serve`
 * records the events of sessions' transitions while its admin hook's receiver answers 503, then while the
 * receiver is down; the controller is stopped with SIGTERM once and SIGKILLed once in between. When the
 * receiver is back and the controller starts again, every event the store recorded (each file ever added
 * under outbox/ on the status ref) reaches the receiver at least once, its `id` in the body and in
 * X-Peerops-Event-Id, and the outbox empties.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { routerFields } from '../api/helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { eventually, startReceiver, type Receiver } from './receiver.ts';

const run = promisify(execFile);
const ADMIN_ASN = 4242420000;
/** Enough for more events than a hook's queue held before the outbox (100): a start hands them all. */
const SESSIONS = 30;

let dir: string;
let controller: ControllerProcess;
let issuer: TokenIssuer;
let rx: Receiver | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-notify-restart-'));
  controller = new ControllerProcess(dir, await freePort());
  await controller.start();
  issuer = await TokenIssuer.fromFile(defaultKeyPath(dir));
});

afterAll(async () => {
  await controller.kill();
  await rx?.close();
  await rm(dir, { recursive: true, force: true });
});

const admin = () => issuer.issueToken(ADMIN_ASN, 'admin').token;
const user = (asn: number) => issuer.issueToken(asn, 'user').token;

async function ok(token: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const answer = await controller.post(token, path, body);
  expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
  return answer.body;
}

/** The id of every event the store ever recorded: each outbox file added on the status ref. */
async function recordedIds(): Promise<string[]> {
  const { stdout } = await run('git', [
    '--git-dir',
    join(dir, 'store.git'),
    'log',
    '--diff-filter=A',
    '--name-only',
    '--format=',
    'peerops-status',
    '--',
    'outbox',
  ]);
  return [...new Set(stdout.split('\n').flatMap((l) => /([0-9a-f]{32})\.json$/.exec(l)?.[1] ?? []))];
}

async function outboxFiles(): Promise<number> {
  const { stdout } = await run('git', [
    '--git-dir',
    join(dir, 'store.git'),
    'ls-tree',
    '-r',
    '--name-only',
    'peerops-status',
    'outbox/',
  ]);
  return stdout.split('\n').filter(Boolean).length;
}

describe('the outbox across restarts', () => {
  it('delivers after SIGTERM and SIGKILL what the receiver could not take before', async () => {
    const receiver = await startReceiver();
    rx = receiver;
    receiver.answer(Array<number>(10_000).fill(503));
    await ok(admin(), '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
    const { agentToken } = (await ok(admin(), '/admin/router', {
      action: 'add',
      ...routerFields('fra1'),
    })) as { agentToken: string };
    await ok(admin(), '/admin/webhooks', { action: 'create', url: receiver.url });

    // while the receiver answers 503: requests and their approval, then SIGTERM
    const sessions: { asn: number; uuid: string; port: number }[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const asn = 4242421000 + i;
      const created = await ok(user(asn), '/session', {
        action: 'create',
        router: 'fra1',
        ipv6: `fd42:${(0x1000 + i).toString(16)}::1`,
        linkLocal: 'fe80::1234',
        publicKey: randomBytes(32).toString('base64'),
      });
      sessions.push({ asn, uuid: created.uuid as string, port: created.listenPort as number });
      await ok(admin(), '/admin/session', { action: 'approve', uuid: created.uuid });
    }
    await eventually('a delivery refused with 503', () => receiver.received.some((r) => r.status === 503));
    expect(await controller.stop()).toBe(0);
    const beforeTerm = receiver.received.length;

    // while the receiver is down: the agent reports them up, one is deleted; then SIGKILL
    const { port } = receiver;
    await receiver.close();
    await controller.start();
    for (const s of sessions)
      await ok(agentToken, '/agent/fra1/modify', { uuid: s.uuid, status: 1, interface: `wg_${s.port}` });
    const gone = sessions[0] as (typeof sessions)[number];
    await ok(user(gone.asn), '/session', { action: 'delete', uuid: gone.uuid });
    await ok(agentToken, '/agent/fra1/modify', { uuid: gone.uuid, status: 0, interface: `wg_${gone.port}` });
    await new Promise((r) => setTimeout(r, 500)); // first attempts fail: nobody listens
    await controller.kill();

    const ids = await recordedIds();
    // per session: created, pending_review, approved, active; the deleted one also session.deleted (and
    // router.agent_offline when the reconciler saw fra1 without an agent meanwhile)
    expect(ids.length).toBeGreaterThanOrEqual(SESSIONS * 4 + 1);
    expect(await outboxFiles()).toBe(ids.length);

    // the receiver is back, answering 200; the controller starts again and delivers the outbox
    const back = await startReceiver({ port });
    rx = back;
    await controller.start();
    const delivered = () => new Set(back.received.map((r) => (JSON.parse(r.body) as NotificationEvent).id));
    await eventually('every recorded event delivered', () => ids.every((id) => delivered().has(id)), 30_000);
    for (const r of back.received)
      expect(r.headers['x-peerops-event-id']).toBe((JSON.parse(r.body) as NotificationEvent).id);
    const types = back.received.map((r) => (JSON.parse(r.body) as NotificationEvent).type).sort();
    expect([...new Set(types)].filter((t) => t.startsWith('session.'))).toEqual(
      [
        ...new Set([
          'session.created',
          'session.pending_review',
          'session.approved',
          'session.active',
          'session.deleted',
        ]),
      ].sort(),
    );
    // confirmed: the outbox is empty on the status ref
    for (let t = 0; t < 100 && (await outboxFiles()) > 0; t++) await new Promise((r) => setTimeout(r, 100));
    expect(await outboxFiles()).toBe(0);
    console.log(
      `outbox restart: ${ids.length} events recorded, ${beforeTerm} refused (503) before SIGTERM, ` +
        `${back.received.length} deliveries after the SIGKILL and restart, ${delivered().size} distinct, lost 0`,
    );
  }, 120_000);
});
