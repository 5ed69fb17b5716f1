/**
 * A manifest the store cannot load never stops the controller (docs/store.md, "What the store refuses"):
 * a real `peerops serve` on 256 MiB of heap, whose git store already holds the 9-level
 * YAML alias bomb (9^9 values in 650 bytes; it once exhausted a 4 GB heap at every start) and a manifest
 * nested too deep, starts, serves /health and the session list, and shows what it skipped: the
 * admin's store condition (also through `peerops admin store status`), the metric by reason and a log
 * line naming each file. Again after a restart.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { MANIFEST_LIMITS } from '../../common/manifests.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { aliasBomb, sessionYaml } from '../validate/hostile-manifests.ts';
import { git } from './git-helpers.ts';

const exec = promisify(execFile);
const good = resolve(import.meta.dirname, '../fixtures/validate/good');
const BOMB = 'sessions/fra1/as4242420099.yaml';
const DEEP = 'sessions/fra1/as4242420098.yaml';
const VALID = 'sessions/ams1/as4242420097.yaml';

let dir: string;
let controller: ControllerProcess;
let admin: string;

async function put(work: string, path: string, text: string): Promise<void> {
  await mkdir(dirname(join(work, path)), { recursive: true });
  await writeFile(join(work, path), text);
}

async function adminGet(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${controller.base}${path}`, {
    headers: { authorization: `Bearer ${admin}` },
    signal: AbortSignal.timeout(20_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** It serves, lists the valid session, and says what it skips and why. */
async function servesAndReports(): Promise<void> {
  expect(await controller.get('/health')).toEqual({ status: 200, body: { status: 'ok' } });
  const list = await controller.post(admin, '/admin/session', { action: 'list' });
  expect(list.status).toBe(200);
  expect(JSON.stringify(list.body)).toContain('"asn":4242420097');
  expect(JSON.stringify(list.body)).not.toContain('4242420099');

  const status = await adminGet('/admin/store');
  expect(status.status).toBe(200);
  expect(status.body).toMatchObject({
    backend: 'git',
    conditions: expect.arrayContaining([
      expect.objectContaining({
        type: 'ManifestsApplied',
        status: 'False',
        reason: 'ManifestsSkipped',
        message: `2 manifests skipped: ${DEEP} (too_deep), ${BOMB} (anchors)`,
      }),
      // skipped manifests are no disk trouble: the store takes writes
      expect.objectContaining({ type: 'Writable', status: 'True', reason: 'WritesAccepted' }),
    ]),
    skippedManifests: [
      {
        path: DEEP,
        reason: 'too_deep',
        errors: [
          {
            pointer: '/',
            message: `line 5: nests deeper than ${MANIFEST_LIMITS.depth} levels; no manifest needs more`,
          },
        ],
      },
      {
        path: BOMB,
        reason: 'anchors',
        errors: [
          {
            pointer: '/',
            message:
              'line 5: YAML anchor &a0: anchors and aliases are not allowed, a manifest spells out every value',
          },
        ],
      },
    ],
  });

  const metrics = await (await fetch(`${controller.base}/metrics`)).text();
  expect(metrics).toContain('peerops_store_manifests_skipped{reason="anchors"} 1');
  expect(metrics).toContain('peerops_store_manifests_skipped{reason="too_deep"} 1');
  expect(metrics).toContain('peerops_store_manifests_skipped{reason="schema"} 0');
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-bounded-load-'));
  const work = join(dir, 'work');
  await mkdir(work);
  await git(work, 'init', '-q', '-b', 'main');
  for (const path of ['routers/fra1.yaml', 'routers/ams1.yaml', 'policy/default.yaml'])
    await put(work, path, await readFile(join(good, path), 'utf8'));
  await put(work, BOMB, aliasBomb(9));
  const depth = MANIFEST_LIMITS.depth + 1;
  await put(work, DEEP, sessionYaml(`  deep: ${'['.repeat(depth)}${']'.repeat(depth)}\n`));
  await put(
    work,
    VALID,
    sessionYaml()
      .replaceAll('4242420099', '4242420097')
      .replaceAll('fra1', 'ams1')
      .replace('fd42:3199::1', 'fd42:3197::1')
      .replace('fe80::3199', 'fe80::3197'),
  );
  await git(work, 'add', '-A');
  await git(work, 'commit', '-q', '-m', 'a network, a bomb and a deep file');
  // the store's repository as a merge left it, before the controller (and its hook) ever ran
  await git(dir, 'clone', '-q', '--bare', work, join(dir, 'store.git'));
  controller = new ControllerProcess(dir, await freePort(), { NODE_OPTIONS: '--max-old-space-size=256' });
  await controller.start();
  admin = (await TokenIssuer.fromFile(defaultKeyPath(dir))).issueToken(4242420000, 'admin').token;
}, 60_000);

afterAll(async () => {
  await controller.kill();
  await rm(dir, { recursive: true, force: true });
});

describe('git store: manifests it cannot load', () => {
  it('starts with the alias bomb in its repository, serves, and shows the skipped manifests', async () => {
    await servesAndReports();
    expect(controller.output).toContain('store: invalid manifest in git skipped');
    expect(controller.output).toContain(BOMB);
    expect(controller.output).toContain(DEEP);
  });

  it('shows them to `peerops admin store status`, one problem a line', async () => {
    const { stdout } = await exec(process.execPath, ['bin/peerops.ts', 'admin', 'store', 'status'], {
      env: { ...process.env, PEEROPS_URL: controller.base, PEEROPS_TOKEN: admin, PEEROPS_CONFIG_DIR: dir },
    });
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^CONDITION\s+STATUS\s+REASON\s+SINCE\s+MESSAGE$/);
    expect(lines[1]).toMatch(/^ManifestsApplied\s+False\s+ManifestsSkipped\s+\S+\s+2 manifests skipped: /);
    // after the conditions' table and a blank line
    expect(lines.slice(lines.indexOf('') + 1)).toEqual([
      expect.stringMatching(/^SKIPPED\s+REASON\s+PROBLEM$/),
      expect.stringMatching(new RegExp(`^${DEEP}\\s+too_deep\\s+/: line 5: nests deeper than`)),
      expect.stringMatching(new RegExp(`^${BOMB}\\s+anchors\\s+/: line 5: YAML anchor &a0: `)),
    ]);
  });

  it('starts again (from its parse cache) and still serves and reports them', async () => {
    await controller.kill();
    await controller.start();
    await servesAndReports();
  }, 60_000);
});
