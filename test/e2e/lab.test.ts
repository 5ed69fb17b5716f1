/**
 * The lab story (lab-story.ts) as a test: controller, two routers with their agents and mesh, two user
 * networks, all real processes in network namespaces; login, create, approve, BGP, routes across the
 * mesh, metrics, modify, restart, delete. Prints each step, the approval → Established times with their
 * breakdown and the wall time; figures are printed, not asserted (targets are measured, not timed by tests).
 */
import { readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { exec } from '../support/netns.ts';
import { runLabStory } from './lab-story.ts';

/** Command lines of running processes that contain `text` (read from /proc). */
async function processesMentioning(text: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of (await readdir('/proc')).filter((d) => /^\d+$/.test(d))) {
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(text)) found.push(cmdline.replaceAll('\0', ' ').trim());
  }
  return found;
}

describe('end-to-end lab', () => {
  it('walks the whole story and leaves nothing behind', async () => {
    const result = await runLabStory({ prefix: 'labt', log: (line) => console.log(line) });
    console.log(`end-to-end lab: wall time ${(result.wallMs / 1000).toFixed(1)} s`);
    expect(result.missing).toEqual([]);
    expect(result.approvalToEstablishedMs).toHaveLength(2);
    // the setup breakdown came from the agent's and both BIRDs' own records, every phase of it
    for (const timeline of result.timelines) {
      expect(timeline.phases.map((p) => p.name)).toHaveLength(8);
      for (const phase of timeline.phases) expect(Number.isFinite(phase.ms)).toBe(true);
    }
    const names = result.steps.map((s) => s.name).join('\n');
    for (const step of [
      /peerops login/,
      /approve u1's session → BGP Established/,
      /approve u2's session → BGP Established/,
      /routes across the mesh/,
      /metrics/,
      /session modify/,
      /session restart/,
      /u1: peerops session delete/,
      /u2: peerops session delete/,
    ])
      expect(names).toMatch(step);

    // nothing left: namespaces, processes, temp dirs
    expect((await exec('ip', ['netns', 'list'])).stdout).not.toContain(result.labId);
    expect(await processesMentioning(result.labId)).toEqual([]);
    expect((await readdir(tmpdir())).filter((d) => d.startsWith(result.labId))).toEqual([]);
  }, 300_000);
});
