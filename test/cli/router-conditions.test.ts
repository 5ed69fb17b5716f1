/**
 * `peerops admin router list` reads each condition the right way round (docs/cli.md, Routers): against a
 * listening controller on the git store, a router whose agent reports shows `ok` and no warning; one
 * that is Stalled and not Ready shows both in its CONDITIONS cell and a warning line with the reason and
 * message; `-o wide` lists every condition as kubectl does (TYPE, STATUS, REASON, AGE, MESSAGE).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { age } from '../../cli/conditions.ts';
import { startHarness, type Harness } from '../api/helpers.ts';
import { heartbeat, markStalled } from '../support/router-conditions.ts';
import { runCli } from './run.ts';

let h: Harness;
let url: string;
let home: string;

const list = (...extra: string[]) =>
  runCli(['admin', 'router', 'list', ...extra], { url, home, token: h.admin });

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-conditions-'));
});
afterAll(async () => {
  await h?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('admin router list: conditions', () => {
  it('a healthy router shows ok and no warning; one never heard from shows -', async () => {
    await heartbeat(url, 'fra1', await h.addRouter('fra1'));
    await h.addRouter('ams1');
    const conditions = h.store.getRouter('fra1')?.status.conditions ?? [];
    // what the issue saw flagged: Reconciling and Stalled False, the healthy state of both
    expect(conditions.map((c) => `${c.type}=${c.status}`).sort()).toEqual([
      'ConfigApplied=True',
      'Ready=True',
      'Reconciling=False',
      'Stalled=False',
    ]);
    const out = await list();
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/^fra1\s.*\sok$/m);
    expect(out.stdout).toMatch(/^ams1\s.*\s-$/m);
    expect(out.stdout).not.toContain('warning');
    expect(out.stdout).not.toMatch(/Reconciling|Stalled|Settled|Progressing/);
  });

  it('a stalled router that is not Ready: in the cell and a warning with reason and message', async () => {
    await heartbeat(url, 'lon1', await h.addRouter('lon1'));
    const since = new Date(Date.now() - (3 * 3600 + 20 * 60) * 1000).toISOString();
    markStalled(h, 'lon1', since);
    const out = await list();
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/^lon1\s.*\sReady=False \(BirdDown\), Stalled=True \(AgentGaveUp\)$/m);
    expect(out.stdout).toMatch(/^fra1\s.*\sok$/m);
    const warnings = out.stdout.split('\n').filter((l) => l.startsWith('warning:'));
    expect(warnings).toEqual([
      'warning: lon1: Ready False (BirdDown): BIRD does not answer on its control socket',
      'warning: lon1: Stalled True (AgentGaveUp): the agent stopped retrying',
    ]);

    const wide = await list('-o', 'wide');
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).toMatch(/^ROUTER\s+TYPE\s+STATUS\s+REASON\s+AGE\s+MESSAGE$/m);
    expect(wide.stdout).toMatch(
      /^lon1\s+Stalled\s+True\s+AgentGaveUp\s+3h20m\s+the agent stopped retrying$/m,
    );
    expect(wide.stdout).toMatch(/^lon1\s+Ready\s+False\s+BirdDown\s+3h20m\s+BIRD does not answer/m);
    expect(wide.stdout).toMatch(/^fra1\s+Reconciling\s+False\s+Settled\s+\d+s\s+the agent applies/m);
    expect(wide.stdout.split('\n').filter((l) => l.startsWith('warning:'))).toEqual(warnings);
  });
});

describe('age: as kubectl prints AGE', () => {
  const now = Date.parse('2026-11-28T12:00:00Z');
  const before = (seconds: number) => new Date(now - seconds * 1000).toISOString();
  it.each([
    [0, '0s'],
    [119, '119s'],
    [150, '2m30s'],
    [600, '10m'],
    [3 * 3600 + 20 * 60, '3h20m'],
    [9 * 3600, '9h'],
    [3 * 86400 + 4 * 3600, '3d4h'],
    [200 * 86400, '200d'],
    [(2 * 365 + 10) * 86400, '2y10d'],
  ])('%i s → %s', (seconds, shown) => {
    expect(age(before(seconds), now)).toBe(shown);
  });
  it('without a time: -', () => expect(age(undefined, now)).toBe('-'));
});
