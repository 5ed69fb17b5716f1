/**
 * When the agent stops long polling (agent/sync/long-poll.ts): after a few answers in a row that were not
 * held, never after one, which is what a stopping controller gives every poll it holds.
 */
import { describe, expect, it } from 'vitest';
import { LongPollSupport } from '../../agent/sync/long-poll.ts';

describe('LongPollSupport', () => {
  it('goes on after a stopping controller released the poll, and after changes', () => {
    const support = new LongPollSupport();
    expect(support.answered(false, 3)).toBe(false); // released by a controller stopping
    expect(support.answered(false, 55_000)).toBe(false); // held by the one that replaced it
    expect(support.answered(false, 4)).toBe(false);
    expect(support.answered(true, 2)).toBe(false); // a change answered at once is a held poll's answer
    expect(support.answered(false, 1)).toBe(false);
    expect(support.answered(false, 1)).toBe(false);
    expect(support.held).toBe(true);
  });

  it('stops after three answers in a row that were not held, and says so once', () => {
    const support = new LongPollSupport();
    expect([support.answered(false, 5), support.answered(false, 5), support.answered(false, 5)]).toEqual([
      false,
      false,
      true,
    ]);
    expect(support.held).toBe(false);
    expect(support.answered(false, 5)).toBe(false);
    expect(support.held).toBe(false);
  });
});
