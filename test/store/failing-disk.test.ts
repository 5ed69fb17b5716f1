/**
 * A disk that fails mid-run (docs/store.md, "Crash safety"): a real `peerops serve` on an ext4 file
 * system (a loop device) shut down under it with EXT4_IOC_SHUTDOWN, after which the file system answers
 * EIO, as a dying disk does. The controller keeps running: every write answers 503 STORE_UNAVAILABLE
 * naming EIO, reads and an agent's session fetch still work from memory, /health says degraded, and
 * SIGTERM exits 0. Needs root (mount, losetup) and e2fsprogs, as the other disk tests need root.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { ControllerProcess, type Answer } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { routerFields, sessionFields } from '../api/helpers.ts';

const run = promisify(execFile);
const ADMIN_ASN = 4242420000;

let root: string;
let mnt: string;
let loop: string | undefined;
let controller: ControllerProcess;

/**
 * EXT4_IOC_SHUTDOWN (`_IOR('X', 125, __u32)`) with EXT4_GOING_FLAGS_NOLOGFLUSH: what xfstests' `godown`
 * does. Node has no ioctl; Python's fcntl module does.
 */
async function shutDown(dir: string): Promise<void> {
  const script = `import fcntl, os, struct
fd = os.open(${JSON.stringify(dir)}, os.O_RDONLY)
fcntl.ioctl(fd, 0x8004587D, struct.pack('I', 2))`;
  await run('python3', ['-c', script]);
}

function expectFailing(answer: Answer, what: string): void {
  expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(503);
  expect(answer.body.code, what).toBe('STORE_UNAVAILABLE');
  expect(answer.body.detail, what).toMatch(/\(EIO\)/);
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'peerops-failing-disk-'));
  const image = join(root, 'disk.img');
  mnt = join(root, 'mnt');
  await mkdir(mnt);
  await run('truncate', ['-s', '64M', image]);
  loop = (await run('losetup', ['--find', '--show', image])).stdout.trim();
  await run('mkfs.ext4', ['-q', loop]);
  await run('mount', [loop, mnt]);
  controller = new ControllerProcess(join(mnt, 'data'), await freePort());
}, 30_000);

afterAll(async () => {
  await controller.kill();
  await run('umount', [mnt]).catch(() => run('umount', ['-l', mnt]).catch(() => {}));
  if (loop) await run('losetup', ['-d', loop]).catch(() => {});
  await rm(root, { recursive: true, force: true });
});

describe('git store: a disk failing with EIO mid-run', () => {
  it('answers 503 to writes, keeps serving reads, says degraded, and exits 0 on SIGTERM', async () => {
    await controller.start();
    const issuer = await TokenIssuer.fromFile(defaultKeyPath(join(mnt, 'data')));
    const admin = issuer.issueToken(ADMIN_ASN, 'admin').token;
    const user = issuer.issueToken(4242421001, 'user').token;
    expect(
      (await controller.post(admin, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).status,
    ).toBe(200);
    const added = await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('fra1') });
    expect(added.status).toBe(200);
    const agentToken = added.body.agentToken as string;
    const created = await controller.post(user, '/session', sessionFields('fra1'));
    expect(created.status).toBe(200);
    const listed = await controller.post(user, '/session', { action: 'list' });

    await shutDown(mnt);
    const refused = {
      create: await controller.post(user, '/session', sessionFields('fra1')),
      modify: await controller.post(user, '/session', {
        action: 'modify',
        uuid: created.body.uuid,
        mtu: 1300,
      }),
      approve: await controller.post(admin, '/admin/session', { action: 'approve', uuid: created.body.uuid }),
      routerAdd: await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('ams1') }),
    };
    for (const [what, answer] of Object.entries(refused)) expectFailing(answer, what);
    expect(await controller.get('/health')).toEqual({
      status: 503,
      body: { status: 'degraded', reason: "the store's disk refuses writes (EIO)" },
    });
    // reads are the index in memory: the same list, and the agent's view of its router
    expect(await controller.post(user, '/session', { action: 'list' })).toEqual(listed);
    const agent = await fetch(`${controller.base}/agent/fra1/sessions`, {
      headers: { authorization: `Bearer ${agentToken}` },
    });
    expect(agent.status).toBe(200);
    // the poll (every 2 s) meets the failing disk too, and the process stays up
    await new Promise((r) => setTimeout(r, 2500));
    expect((await controller.get('/livez')).status).toBe(200);

    expect(await controller.stop()).toBe(0);
    expect(controller.output).toMatch(/"msg":"stopped"/);
  }, 60_000);
});
