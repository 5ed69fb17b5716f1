/**
 * The time-to-truth benchmark's reading of the API (scripts/bench-truth/judge.ts; docs/benchmarks.md,
 * "Time to truth"): its hints are those of the messages the agent really writes (agent/reconcile/
 * decisions.ts), so that a figure is "met" only when the peer is told where to look.
 */
import { describe, expect, it } from 'vitest';
import { judge, type SessionFacts } from '../../agent/reconcile/decisions.ts';
import { SessionStatus } from '../../common/status.ts';
import {
  bgpHint,
  clean,
  established,
  ready,
  verdict,
  wireguardHint,
} from '../../scripts/bench-truth/judge.ts';
import type { SessionRecord } from '../../scripts/bench-truth/rig.ts';

const T0 = Date.parse('2026-11-28T00:00:00Z');

/** An ACTIVE session that was Established until a second ago, as the agent sees it now. */
function facts(bgp: string, handshakeAgoS: number): SessionFacts {
  return {
    session: { status: SessionStatus.ACTIVE, listenPort: 21077, asn: 4242421077 },
    ours: { asn: 4242420077, linkLocal: 'fe80::1' },
    failure: undefined,
    protocol: { bgpState: bgp, lastError: undefined },
    lastHandshake: Math.floor(T0 / 1000) - handshakeAgoS,
    memory: {
      configuredAt: T0 - 600_000,
      wasEstablished: true,
      downSince: undefined,
      lastEstablished: T0 - 1000,
      bgpState: 'Established',
      stateSince: T0 - 600_000,
    },
    now: T0,
  };
}

function record(f: SessionFacts): SessionRecord {
  const v = judge(f);
  return {
    uuid: 'caedd6ee-b959-461f-a898-237cb88477ea',
    status: v.status ?? SessionStatus.ACTIVE,
    statusName: 'x',
    listenPort: 21077,
    lastError: v.message === undefined ? null : { code: 'ERROR', message: v.message },
    bgpState: f.protocol?.bgpState ?? null,
  };
}

describe('the hints the bench requires', () => {
  it("the peer's BIRD stopped (tunnel up, BGP down): the BGP hint, not the WireGuard one", () => {
    const s = record(facts('Active', 5));
    expect(s.status).toBe(SessionStatus.ERROR);
    expect(bgpHint(s)).toBe(true);
    expect(wireguardHint(s)).toBe(false);
  });

  it("the peer's WireGuard down (no handshake past the reject time): the WireGuard hint", () => {
    const s = record(facts('Established', 181));
    expect(s.status).toBe(SessionStatus.ERROR);
    expect(wireguardHint(s)).toBe(true);
    expect(bgpHint(s)).toBe(false);
  });

  it('a clean session is Established and has no hint', () => {
    const s = record(facts('Established', 5));
    expect(clean(s)).toBe(true);
    expect(clean(record(facts('Active', 5)))).toBe(false);
    expect(bgpHint(s) || wireguardHint(s)).toBe(false);
    expect(established({ ...s, bgpState: 'Connect' })).toBe(false);
  });
});

describe('router Ready and verdicts', () => {
  it('Ready only with a Ready condition that is True', () => {
    const at = (status?: string) => ({
      name: 'r',
      status: status ? { conditions: [{ type: 'Ready', status, reason: 'X' }] } : {},
    });
    expect(ready(at('True'))).toBe(true);
    expect(ready(at('False'))).toBe(false);
    expect(ready(at('Unknown'))).toBe(false);
    expect(ready(at())).toBe(false);
  });

  it('met within the target, MISSED past it or when never seen', () => {
    expect(verdict(2000, 2000)).toBe('met');
    expect(verdict(2001, 2000)).toBe('MISSED');
    expect(verdict(undefined, 2000)).toBe('MISSED');
  });
});
