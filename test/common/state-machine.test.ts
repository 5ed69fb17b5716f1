/**
 * Every (status, trigger) pair against the table of docs/architecture.md, written out here independently of
 * the implementation: allowed pairs give the listed result, every other pair is INVALID_STATE.
 */
import { describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import { allowed, transition, type Outcome, type Trigger } from '../../common/state-machine.ts';
import { ALL_STATUS_CODES, type SessionStatusCode } from '../../common/status.ts';

type Expected = SessionStatusCode | 'removed' | { to: SessionStatusCode; restart: true };

/** docs/architecture.md's table, row by row: trigger → from → result. */
const TABLE: Record<string, Partial<Record<SessionStatusCode, Expected>>> = {
  approve: { 3: 4 },
  // terminal REJECTED (7), PURGED (8): kept for their owner to read the reason (docs/api.md, Decisions)
  reject: { 3: 7 },
  modify: { 1: 4, 2: 4, 6: 4, 3: 3, 4: 4, 0: 0 },
  restart: { 1: { to: 4, restart: true }, 2: { to: 4, restart: true }, 6: { to: 4, restart: true } },
  delete: { 0: 5, 1: 5, 2: 5, 4: 5, 6: 5, 3: 'removed', 7: 'removed', 8: 'removed' },
  disable: { 1: 0, 2: 0, 4: 0, 6: 0 },
  enable: { 0: 4 },
  // admin, for a session whose agent never tears it down (docs/api.md, purge)
  purge: { 5: 8 },
  // agent reports: `report<reported>` → from → result
  report1: { 4: 1, 6: 1, 1: 1, 2: 1 },
  // 4/6 → 2: configured, BGP not Established after the grace; 6 → 4: a retried setup waits for BGP
  report2: { 1: 2, 2: 2, 4: 2, 6: 2 },
  report4: { 4: 4, 6: 4 },
  report6: { 4: 6, 6: 6 },
  report0: { 5: 'removed' },
};

const ACTIONS = ['approve', 'reject', 'modify', 'restart', 'delete', 'disable', 'enable', 'purge'] as const;

function triggers(): { key: string; trigger: Trigger }[] {
  const out: { key: string; trigger: Trigger }[] = ACTIONS.map((kind) => ({ key: kind, trigger: { kind } }));
  for (const status of ALL_STATUS_CODES)
    out.push({ key: `report${status}`, trigger: { kind: 'report', status } });
  return out;
}

function toOutcome(expected: Expected): Outcome {
  if (expected === 'removed') return { result: 'removed' };
  if (typeof expected === 'number') return { result: 'status', to: expected, restart: false };
  return { result: 'status', to: expected.to, restart: true };
}

describe('session state machine (docs/architecture.md)', () => {
  for (const from of ALL_STATUS_CODES) {
    for (const { key, trigger } of triggers()) {
      const expected = TABLE[key]?.[from];
      const label = expected === undefined ? 'INVALID_STATE' : JSON.stringify(expected);
      it(`status ${from} + ${key} → ${label}`, () => {
        if (expected === undefined) {
          let err: unknown;
          try {
            transition(from, trigger);
          } catch (e) {
            err = e;
          }
          expect(isProblem(err, 'INVALID_STATE')).toBe(true);
          expect(allowed(from, trigger)).toBe(false);
        } else {
          expect(transition(from, trigger)).toEqual(toOutcome(expected));
          expect(allowed(from, trigger)).toBe(true);
        }
      });
    }
  }

  it('a new session: create → 3, or 4 when the router auto-approves', () => {
    expect(transition(undefined, { kind: 'create', autoApprove: false })).toEqual(toOutcome(3));
    expect(transition(undefined, { kind: 'create', autoApprove: true })).toEqual(toOutcome(4));
  });

  it('a manifest merged without status → 3, or 4 where policy says a merge is approval', () => {
    expect(transition(undefined, { kind: 'merge', mergeIsApproval: false })).toEqual(toOutcome(3));
    expect(transition(undefined, { kind: 'merge', mergeIsApproval: true })).toEqual(toOutcome(4));
  });

  it('create and merge are INVALID_STATE for an existing session, every other trigger for a missing one', () => {
    for (const from of ALL_STATUS_CODES) {
      expect(() => transition(from, { kind: 'create', autoApprove: true })).toThrow(/not allowed/);
      expect(() => transition(from, { kind: 'merge', mergeIsApproval: false })).toThrow(/not allowed/);
    }
    for (const { trigger } of triggers()) {
      let err: unknown;
      try {
        transition(undefined, trigger);
      } catch (e) {
        err = e;
      }
      expect(isProblem(err, 'INVALID_STATE')).toBe(true);
    }
  });

  it('says which status and trigger were refused', () => {
    expect(() => transition(5, { kind: 'report', status: 1 })).toThrow(
      'a report of status 1 (ACTIVE) is not allowed for a session in status 5 (QUEUED_FOR_DELETE)',
    );
  });
});
