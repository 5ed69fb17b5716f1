/**
 * An adopted session without the peer's DN42 IPv6 (docs/api.md, Adoptions) on the agent's own link path
 * (a session whose takeover record is not there, e.g. set up anew): the router's own addresses as for any
 * session, and no route into the tunnel for the address the session does not have. Pure: no system.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AgentSession } from '../../../common/agent-api.ts';
import { SessionStatus } from '../../../common/status.ts';
import { parseConfig } from '../../../agent/config.ts';
import { sessionInterfaceSpec } from '../../../agent/reconcile/desired.ts';

const config = parseConfig(
  {
    server: { listen: '127.0.0.1:0' },
    node: { name: 'r1', id: 1, region: 'eu' },
    controlPlane: { url: 'http://127.0.0.1:9', token: 'x'.repeat(32) },
    routing: { controlSocket: '/run/bird/bird.ctl' },
    tunnel: { dn42Ipv6LinkLocal: 'fe80::66', dn42Ipv6: 'fd42:66::1' },
    autoUpdate: { enabled: false },
  },
  'agent.json',
);

const session = (ipv6: string | null): AgentSession => ({
  uuid: '6f1c1d2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f',
  asn: 4242421100,
  status: SessionStatus.QUEUED_FOR_SETUP,
  statusName: 'QUEUED_FOR_SETUP',
  interface: 'wg_31000',
  listenPort: 31000,
  endpoint: null,
  publicKey: randomBytes(32).toString('base64'),
  ipv6,
  linkLocal: 'fe80::100',
  ipv4: null,
  mtu: 1420,
  mpbgp: true,
  extendedNextHop: false,
  restartGeneration: 0,
});

describe('a session without a DN42 IPv6 on its link', () => {
  it('routes nothing into the tunnel; one with it routes its /128', () => {
    const without = sessionInterfaceSpec(session(null), config);
    expect(without.peerRoutes).toEqual([]);
    expect(without.addresses).toEqual(['fe80::66/64', 'fd42:66::1/128']);
    expect(sessionInterfaceSpec(session('fd42:1100::1'), config).peerRoutes).toEqual(['fd42:1100::1']);
  });
});
