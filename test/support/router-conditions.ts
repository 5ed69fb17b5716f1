/**
 * Routers in the conditions the portal and CLI tests show (docs/kubernetes.md, Conditions): a heartbeat
 * over HTTP as `peerops agent` sends it, and a router the controller marks not Ready and Stalled.
 */
import { expect } from 'vitest';
import { setConditions } from '../../common/conditions.ts';
import type { Harness } from '../api/helpers.ts';

/** The agent's heartbeat to the controller at `url`, with its ConfigApplied condition True. */
export async function heartbeat(url: string, router: string, agentToken: string): Promise<void> {
  const res = await fetch(`${url}/agent/${router}/heartbeat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agentToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      version: '0.1.0',
      uptime: 60,
      conditions: [
        {
          type: 'ConfigApplied',
          status: 'True',
          reason: 'Applied',
          message: 'BIRD runs the configuration the agent rendered',
          lastTransitionTime: new Date().toISOString(),
        },
      ],
    }),
  });
  expect(res.status, await res.text()).toBe(200);
}

/** The messages a stalled router's conditions carry. */
export const STALLED = {
  ready: { reason: 'BirdDown', message: 'BIRD does not answer on its control socket' },
  stalled: { reason: 'AgentGaveUp', message: 'the agent stopped retrying' },
} as const;

/** `router` Ready=False (BirdDown) and Stalled=True (AgentGaveUp) since `since`, its other conditions kept. */
export function markStalled(h: Harness, router: string, since: string): void {
  h.store.recordRouterStatus(router, {
    conditions: setConditions(
      h.store.getRouter(router)?.status.conditions,
      {
        Ready: { status: 'False', ...STALLED.ready },
        Stalled: { status: 'True', ...STALLED.stalled },
      },
      since,
    ),
  });
}
