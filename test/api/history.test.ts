/**
 * Session history through a real `peerops serve` (docs/api.md, Session history): an agent's reports
 * become points of GET /session/:uuid/history for the session's owner and admins (another ASN gets 404,
 * a bad range 400 naming the field), `peerops session history` prints them as a table, and the points
 * are still there after the controller is stopped and started again (SIGTERM flushes what waits), and
 * after a SIGKILL once the minute's flush has written them (a crash loses at most the last minute).
 */
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import type { SessionHistoryResponse } from '../../common/history.ts';
import { routerFields, sessionFields } from './helpers.ts';
import { runCli } from '../cli/run.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';

const ADMIN_ASN = 4242420000;
const PEER_ASN = 4242421234;
const OTHER_ASN = 4242425678;

let dir: string;
let controller: ControllerProcess;
let issuer: TokenIssuer;
let uuid: string;
let agentToken: string;

const admin = () => issuer.issueToken(ADMIN_ASN, 'admin').token;
const user = (asn: number) => issuer.issueToken(asn, 'user').token;

async function ok(token: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const answer = await controller.post(token, path, body);
  expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
  return answer.body;
}

const report = (rxBytes: number, txBytes: number, rtt: number | null) =>
  ok(agentToken, '/agent/fra1/report', {
    sessions: [{ uuid, rtt, rxBytes, txBytes, routesImported: 3, routesExported: 1480 }],
  });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-history-'));
  // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
  controller = new ControllerProcess(dir, await freePort(), {
    PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY: 'true',
  });
  await controller.start();
  issuer = await TokenIssuer.fromFile(defaultKeyPath(dir));
  await ok(admin(), '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
  ({ agentToken } = (await ok(admin(), '/admin/router', {
    action: 'add',
    ...routerFields('fra1', { autoApprove: true }),
  })) as { agentToken: string });
  ({ uuid } = (await ok(user(PEER_ASN), '/session', sessionFields('fra1'))) as { uuid: string });
}, 60_000);

afterAll(async () => {
  await controller.kill();
  await rm(dir, { recursive: true, force: true });
});

describe('session history', () => {
  it('answers the reports as points to the owner and admins, and nobody else', async () => {
    await report(1000, 500, 10);
    await report(5000, 2500, 20);
    await report(7048, 3524, null);
    const answer = await controller.get(`/session/${uuid}/history?range=24h`, user(PEER_ASN));
    expect(answer.status).toBe(200);
    const history = answer.body as unknown as SessionHistoryResponse;
    expect(history).toMatchObject({ uuid, range: '24h', stepSeconds: 60 });
    // the three reports fall in one or two minutes: the bytes moved since the first, the mean RTT
    const total = (k: 'rxBytes' | 'txBytes') => history.points.reduce((n, p) => n + (p[k] ?? 0), 0);
    expect(total('rxBytes')).toBe(6048);
    expect(total('txBytes')).toBe(3024);
    expect(history.points.at(-1)).toMatchObject({ routesImported: 3, routesExported: 1480 });
    const rtts = history.points.map((p) => p.rtt).filter((r) => r !== null);
    expect(rtts.length).toBeGreaterThan(0);
    expect(rtts.every((r) => r >= 10 && r <= 20)).toBe(true);

    expect((await controller.get(`/session/${uuid}/history?range=30d`, admin())).status).toBe(200);
    const other = await controller.get(`/session/${uuid}/history`, user(OTHER_ASN));
    expect(other.status).toBe(404);
    const bad = await controller.get(`/session/${uuid}/history?range=1y`, user(PEER_ASN));
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('range');
    expect((await controller.get(`/session/${uuid}/history`)).status).toBe(401);
  });

  it('prints the points as a table in the CLI', async () => {
    const home = join(dir, 'cli');
    const table = await runCli(['session', 'history', uuid.slice(0, 8)], {
      url: controller.base,
      home,
      token: user(PEER_ASN),
    });
    expect(table.stderr).toBe('');
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^TIME\s+RTT MS\s+RECEIVED\s+SENT\s+ROUTES IN\s+ROUTES OUT$/m);
    expect(table.stdout).toMatch(/\s3\s+1480$/m);
    const wrong = await runCli(['session', 'history', uuid, '--range', '1w'], {
      url: controller.base,
      home,
      token: user(PEER_ASN),
    });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain("unknown range '1w'");
  });

  it('keeps the points across a restart, in a file per session outside the git store', async () => {
    const before = (await controller.get(`/session/${uuid}/history`, user(PEER_ASN))).body;
    expect(await controller.stop()).toBe(0);
    const files = await readdir(join(dir, 'history'));
    expect(files).toEqual([`${uuid}.hist`]);
    // three samples of 14 bytes, as the reports came
    expect((await stat(join(dir, 'history', `${uuid}.hist`))).size).toBe(3 * 14);
    await controller.start();
    const after = (await controller.get(`/session/${uuid}/history`, user(PEER_ASN))).body;
    expect(after).toEqual(before);
  });

  it('keeps what the minute’s flush wrote across a SIGKILL', async () => {
    const file = join(dir, 'history', `${uuid}.hist`);
    const before = (await stat(file)).size;
    await report(8000, 4000, 30);
    // appended within a minute of the report (HISTORY_FLUSH_MS), not at once
    await expect
      .poll(async () => (await stat(file)).size, { timeout: 90_000, interval: 1000 })
      .toBe(before + 14);
    await controller.kill();
    await controller.start();
    const after = (await controller.get(`/session/${uuid}/history`, user(PEER_ASN))).body;
    const points = (after as unknown as SessionHistoryResponse).points;
    expect(points.reduce((n, p) => n + (p.rxBytes ?? 0), 0)).toBe(6048 + 952);
  }, 120_000);
});
