/**
 * The lab's setup breakdown (setup-timeline.ts) from records in the forms the agent and BIRD 2 write
 * them: the phases add up from the approval to Established, and a missing record is named, not guessed.
 */
import { describe, expect, it } from 'vitest';
import { median } from './lab-story.ts';
import { birdLogLines, phaseMedians, setupTimeline } from './setup-timeline.ts';

/** BIRD prints local time; the lab reads it back on the same machine. */
const at = (hms: string) => new Date(`2026-11-26T${hms}`).getTime();
const line = (hms: string, cls: string, text: string) => `2026-11-26 ${hms} <${cls}> ${text}`;

const agentLine = (hms: string, fields: object) =>
  `${JSON.stringify({ level: 30, time: at(hms), msg: 'pass applied changes', ...fields })}\n`;

const input = {
  askedAt: at('01:00:00.000'),
  approvedAt: at('01:00:00.300'),
  // the end of a line whose start the lab's output buffer dropped, a pass of another change, this one's
  agentOutput: [
    agentLine('00:59:58.000', { answeredAt: at('00:59:57.900'), policyMs: 5, stepMs: {} }).slice(30),
    agentLine('00:59:59.000', { answeredAt: at('00:59:58.900'), policyMs: 5, stepMs: { tunnels: 1 } }),
    agentLine('01:00:01.000', {
      answeredAt: at('01:00:00.250'),
      policyMs: 10,
      stepMs: { render: 2, apply: 80, tunnels: 400 },
    }),
  ],
  routerBirdLog: [
    line('00:59:59.500', 'INFO', 'Reconfiguring'),
    line('00:59:59.501', 'INFO', 'Reconfigured'),
    line('01:00:00.312', 'INFO', 'Reconfiguring'),
    line('01:00:00.313', 'TRACE', 'dn42_20001: Reconfigured'),
    line('01:00:00.315', 'INFO', 'Reconfigured'),
  ].join('\n'),
  userBirdLog: [
    line('01:00:00.010', 'TRACE', 'peerops: Connect delayed by 1 seconds'),
    line('01:00:00.760', 'TRACE', 'peerops: Connected'),
    line('01:00:00.762', 'TRACE', 'peerops: State changed to up'),
  ].join('\n'),
  protocols: ['peerops'],
};

describe('setup timeline', () => {
  it("reads BIRD's log lines with millisecond times", () => {
    expect(birdLogLines(`${line('01:00:00.712', 'INFO', 'Reconfiguring')}\nnot a log line\n`)).toEqual([
      { at: at('01:00:00.712'), text: 'Reconfiguring' },
    ]);
  });

  it('splits approval → Established into phases that add up, and says who connected', () => {
    const t = setupTimeline(input);
    expect(t.phases.map((p) => [p.name.split(' (')[0], Math.round(p.ms)])).toEqual([
      ['long-poll wake', -50],
      ['fetch the routing policy', 10],
      ['render', 2],
      ['bird -p check and swap', 50],
      ['configure', 3],
      ['tunnel up', 427],
      ['BGP connect', 18],
      ['OPEN → Established', 2],
    ]);
    const sum = t.phases.reduce((a, p) => a + p.ms, 0);
    expect(Math.round(sum)).toBe(at('01:00:00.762') - input.approvedAt);
    expect(t.notes[0]).toBe("peerops: the user's BIRD connected");
    expect(t.notes.slice(1)).toEqual(['-0.29 s: peerops: Connect delayed by 1 seconds']);
  });

  it('names what is missing instead of guessing', () => {
    const t = setupTimeline({ ...input, routerBirdLog: '' });
    expect(t.phases).toEqual([]);
    expect(t.notes).toEqual(['missing records: Reconfiguring, Reconfigured']);
    expect(setupTimeline({ ...input, userBirdLog: '' }).notes).toEqual([
      'missing records: the user BIRD did not log Established',
    ]);
  });

  it('takes the median of each phase over several setups', () => {
    const a = setupTimeline(input);
    const slower = { ...a, phases: a.phases.map((p) => ({ ...p, ms: p.ms * 3 })) };
    expect(phaseMedians([a, slower], median).find((p) => p.name === 'render')?.ms).toBe(4);
  });
});
