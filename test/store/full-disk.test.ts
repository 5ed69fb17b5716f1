/**
 * The git store on a disk that refuses writes (docs/store.md, "Crash safety"): a real `peerops serve` on
 * a small tmpfs. While the disk is full, and while it is read-only, every write answers 503
 * STORE_UNAVAILABLE and changes nothing, /health says why, reads go on; once space returns (or the disk
 * is writable again) writes succeed without a restart, and a restart holds every acknowledged write.
 * Mounting needs root, as the network-namespace tests do.
 */
import { execFile } from 'node:child_process';
import { open, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { ControllerProcess, type Answer } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { routerFields, sessionFields } from '../api/helpers.ts';

const run = promisify(execFile);
const ADMIN_ASN = 4242420000;

let root: string;
let mnt: string;
let controller: ControllerProcess;
let issuer: TokenIssuer;
let agentToken: string;
let admin: string;

const user = (asn: number) => issuer.issueToken(asn, 'user').token;

/** Fill the file system to the last byte; returns the filler's path. */
async function fill(): Promise<string> {
  const filler = join(mnt, 'filler');
  const handle = await open(filler, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) await handle.write(chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  // the last partial chunk's worth, byte by byte down to nothing
  for (let size = 32 * 1024; size >= 1; size = Math.floor(size / 2)) {
    try {
      for (;;) await handle.write(Buffer.alloc(size));
    } catch {
      // full at this size: try a smaller one
    }
  }
  await handle.close();
  return filler;
}

function expectUnavailable(answer: Answer, what: string): void {
  expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(503);
  expect(answer.body.code, what).toBe('STORE_UNAVAILABLE');
}

async function sessions(): Promise<unknown[]> {
  const listed = await controller.post(admin, '/admin/session', { action: 'list' });
  expect(listed.status).toBe(200);
  return (listed.body.sessions as { metrics?: unknown }[]).map(({ metrics: _m, ...s }) => s);
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'peerops-full-disk-'));
  mnt = join(root, 'mnt');
  await mkdir(mnt);
  await run('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mnt]);
  const data = join(mnt, 'data');
  controller = new ControllerProcess(data, await freePort());
  issuer = await TokenIssuer.fromFile(defaultKeyPath(data));
  admin = issuer.issueToken(ADMIN_ASN, 'admin').token;
  await controller.start();
  expect(
    (await controller.post(admin, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).status,
  ).toBe(200);
  const added = await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('fra1') });
  expect(added.status).toBe(200);
  agentToken = added.body.agentToken as string;
});

afterAll(async () => {
  await controller.kill();
  await run('umount', ['-l', mnt]).catch(() => {});
  await rm(root, { recursive: true, force: true });
});

interface Held {
  uuid: string;
  asn: number;
  listenPort: number;
}

const held = (asn: number, answer: Answer): Held => ({
  uuid: answer.body.uuid as string,
  asn,
  listenPort: answer.body.listenPort as number,
});

/**
 * Every kind of write, each one the API would take (so only the disk refuses it): on a session pending
 * review (approve, modify, delete), a session queued for setup (the agent's report), a new session, a
 * router and the policy.
 */
async function everyWrite(pending: Held, queued: Held, asn: number) {
  return {
    create: await controller.post(user(asn), '/session', sessionFields('fra1')),
    approve: await controller.post(admin, '/admin/session', { action: 'approve', uuid: pending.uuid }),
    modify: await controller.post(user(pending.asn), '/session', {
      action: 'modify',
      uuid: pending.uuid,
      mtu: 1300,
    }),
    delete: await controller.post(user(pending.asn), '/session', { action: 'delete', uuid: pending.uuid }),
    agentReport: await controller.post(agentToken, '/agent/fra1/modify', {
      uuid: queued.uuid,
      status: 1,
      interface: `wg_${queued.listenPort}`,
    }),
    routerAdd: await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('ams1') }),
    policySet: await controller.post(admin, '/admin/policy', {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN, maxPendingPerAsn: 5 },
    }),
  };
}

let pendingOne: Held;
let queuedOne: Held;

describe('git store: a full or read-only disk', () => {
  it('answers 503 STORE_UNAVAILABLE to every write while full, loses nothing, and recovers when space returns', async () => {
    pendingOne = held(4242421001, await controller.post(user(4242421001), '/session', sessionFields('fra1')));
    queuedOne = held(4242421002, await controller.post(user(4242421002), '/session', sessionFields('fra1')));
    expect(
      (await controller.post(admin, '/admin/session', { action: 'approve', uuid: queuedOne.uuid })).status,
    ).toBe(200);
    const before = await sessions();

    const filler = await fill();
    const refused = await everyWrite(pendingOne, queuedOne, 4242421003);
    for (const [what, answer] of Object.entries(refused)) expectUnavailable(answer, what);
    const health = await controller.get('/health');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'degraded', reason: expect.stringMatching(/ENOSPC/) });
    expect(await sessions()).toEqual(before);

    await rm(filler);
    // without a restart: the poll finds the disk writable again, and writes go through
    const deadline = Date.now() + 15_000;
    while ((await controller.get('/health')).status !== 200) {
      if (Date.now() > deadline) throw new Error(`health stayed degraded:\n${controller.output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const reported = await controller.post(agentToken, '/agent/fra1/modify', {
      uuid: queuedOne.uuid,
      status: 1,
      interface: `wg_${queuedOne.listenPort}`,
    });
    expect(reported.status).toBe(200);
    queuedOne = held(4242421003, await controller.post(user(4242421003), '/session', sessionFields('fra1')));
    expect(
      (await controller.post(admin, '/admin/session', { action: 'approve', uuid: queuedOne.uuid })).status,
    ).toBe(200);
    const acknowledged = await sessions();

    await controller.kill();
    await controller.start();
    expect(await sessions()).toEqual(acknowledged);
  }, 120_000);

  it('answers 503 while the file system is read-only, and writes again once it is writable', async () => {
    const before = await sessions();
    // the kernel refuses while a file there is open for writing (the poll's disk probe, a flush of the
    // restarted controller): try again until it is not, as an operator would
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        await run('mount', ['-o', 'remount,ro', mnt]);
        break;
      } catch (err) {
        if (!/busy/.test(String(err)) || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    try {
      const refused = await everyWrite(pendingOne, queuedOne, 4242421004);
      for (const [what, answer] of Object.entries(refused)) expectUnavailable(answer, what);
      expect((await controller.get('/health')).body).toMatchObject({
        status: 'degraded',
        reason: expect.stringMatching(/EROFS/),
      });
      expect(await sessions()).toEqual(before);
    } finally {
      await run('mount', ['-o', 'remount,rw', mnt]);
    }
    const created = await controller.post(user(4242421004), '/session', {
      ...sessionFields('fra1'),
      publicKey: randomBytes(32).toString('base64'),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect((await controller.get('/health')).status).toBe(200);
  }, 120_000);
});
