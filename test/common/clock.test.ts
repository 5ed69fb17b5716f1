/** isoNow: the ISO time of Date.now(), formatted once per millisecond. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { isoNow } from '../../common/clock.ts';

describe('isoNow', () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  it('is the ISO string of the current millisecond, and follows the clock', () => {
    vi.useFakeTimers({ now: Date.parse('2026-11-22T10:00:00.000Z') });
    expect(isoNow()).toBe('2026-11-22T10:00:00.000Z');
    expect(isoNow()).toBe('2026-11-22T10:00:00.000Z');
    vi.advanceTimersByTime(1);
    expect(isoNow()).toBe('2026-11-22T10:00:00.001Z');
    vi.setSystemTime(Date.parse('2027-01-01T00:00:00.000Z'));
    expect(isoNow()).toBe('2027-01-01T00:00:00.000Z');
  });
});
