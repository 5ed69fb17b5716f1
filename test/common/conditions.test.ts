/**
 * Each condition type's healthy status (docs/kubernetes.md, Conditions): Ready, ConfigApplied,
 * BirdRunning and ManifestsApplied are well when True, Reconciling and Stalled when False; Unknown
 * never is. The conditions the controller itself writes for a settled object all read healthy, those
 * of a failed session do not.
 */
import { describe, expect, it } from 'vitest';
import {
  acceptedConditions,
  healthyStatus,
  isHealthy,
  reportingRouterConditions,
  withSessionConditions,
} from '../../common/conditions.ts';
import { SessionStatus } from '../../common/status.ts';

const NOW = '2026-11-28T00:00:00.000Z';

describe('condition polarity', () => {
  it.each([
    // type, status, healthy
    ['Ready', 'True', true],
    ['Ready', 'False', false],
    ['Ready', 'Unknown', false],
    ['ConfigApplied', 'True', true],
    ['ConfigApplied', 'False', false],
    ['ConfigApplied', 'Unknown', false],
    ['BirdRunning', 'True', true],
    ['BirdRunning', 'False', false],
    ['BirdRunning', 'Unknown', false],
    ['ManifestsApplied', 'True', true],
    ['ManifestsApplied', 'False', false],
    ['ManifestsApplied', 'Unknown', false],
    ['Reconciling', 'False', true],
    ['Reconciling', 'True', false],
    ['Reconciling', 'Unknown', false],
    ['Stalled', 'False', true],
    ['Stalled', 'True', false],
    ['Stalled', 'Unknown', false],
    // a type this version does not know is read as Ready is
    ['SomethingNew', 'True', true],
    ['SomethingNew', 'False', false],
  ] as const)('%s=%s is healthy: %s', (type, status, healthy) => {
    expect(isHealthy({ type, status })).toBe(healthy);
  });

  it('names each known type once with its healthy status', () => {
    expect(
      Object.fromEntries(
        ['Ready', 'ConfigApplied', 'BirdRunning', 'ManifestsApplied', 'Reconciling', 'Stalled'].map((t) => [
          t,
          healthyStatus(t),
        ]),
      ),
    ).toEqual({
      Ready: 'True',
      ConfigApplied: 'True',
      BirdRunning: 'True',
      ManifestsApplied: 'True',
      Reconciling: 'False',
      Stalled: 'False',
    });
  });

  it('a router whose agent reports and an accepted policy read healthy in every condition', () => {
    for (const conditions of [
      reportingRouterConditions(undefined, NOW),
      acceptedConditions(undefined, NOW),
    ]) {
      expect(conditions.map((c) => c.type)).toEqual(['Ready', 'Reconciling', 'Stalled']);
      expect(conditions.filter((c) => !isHealthy(c))).toEqual([]);
    }
  });

  it('an ACTIVE session is healthy; a SETUP_FAILED one is not Ready and Stalled', () => {
    const active = withSessionConditions(
      { code: SessionStatus.ACTIVE, name: 'ACTIVE', lastTransitionTime: NOW },
      undefined,
    );
    expect(active.conditions?.filter((c) => !isHealthy(c))).toEqual([]);
    const failed = withSessionConditions(
      {
        code: SessionStatus.SETUP_FAILED,
        name: 'SETUP_FAILED',
        lastTransitionTime: NOW,
        lastError: { code: 'BIRD_CONFIG', message: 'bird: syntax error' },
      },
      undefined,
    );
    expect(failed.conditions?.filter((c) => !isHealthy(c)).map((c) => `${c.type}=${c.status}`)).toEqual([
      'Ready=False',
      'Stalled=True',
    ]);
  });
});
