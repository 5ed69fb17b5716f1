/**
 * The served /openapi.json passes Redocly's linter (`@redocly/cli lint`, the recommended rules and
 * redocly.yaml) with no error: the document the routes' schemas generate is valid OpenAPI 3.1 and its
 * examples validate against their schemas. Runs the local binary, not a downloaded one.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { expectOk, startHarness, type Harness } from './helpers.ts';

/** The package's own entry, run by this Node (its bin's `env node` may find an older one first). */
const REDOCLY = join(import.meta.dirname, '../../node_modules/@redocly/cli/bin/cli.js');
const CONFIG = join(import.meta.dirname, '../../redocly.yaml');

let h: Harness;
let dir: string;
beforeAll(async () => {
  h = await startHarness();
  dir = await mkdtemp(join(tmpdir(), 'peerops-openapi-'));
});
afterAll(async () => {
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('redocly lint of the served /openapi.json: no errors', async () => {
  const file = join(dir, 'openapi.json');
  await writeFile(file, (await expectOk(h.get('/openapi.json'))).body);
  const run = await promisify(execFile)(
    process.execPath,
    [REDOCLY, 'lint', file, '--config', CONFIG, '--format', 'json'],
    {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
      maxBuffer: 16 << 20,
    },
  ).catch((err: { stdout?: string; stderr?: string; code?: number }) => err);
  const report = JSON.parse(run.stdout ?? '{}') as {
    totals?: { errors: number; warnings: number };
    problems?: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
  };
  const problems = (report.problems ?? []).map(
    (p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ''}: ${p.message}`,
  );
  expect(report.totals, run.stderr).toBeDefined();
  // warnings too, today: say so in redocly.yaml with the reason before accepting one
  expect(problems).toEqual([]);
  expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
}, 120_000);
