/**
 * The agent resolves a session's endpoint name itself and judges every address by the controller's rules
 * (docs/agent.md, endpoint resolution): a name resolving to 127.0.0.1 is never set on WireGuard, and the session reports
 * SETUP_FAILED with the reason; a good name reaches WireGuard as its address, so WireGuard does not
 * resolve it again after the check.
 *
 * The resolver is injected (ReconcileDeps.resolve, the one seam the agent has for it) rather than the
 * machine's /etc/hosts edited: the file is shared with every other test on the machine, and a name added
 * there would answer them too. Everything after the lookup is the agent's own code; the system resolver
 * itself is asked only for `localhost`, which every hosts file has.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../agent/config.ts';
import { NodeReconciler } from '../../agent/reconcile/node-reconciler.ts';
import {
  EndpointRefused,
  resolveEndpoint,
  systemResolve,
  type Resolve,
} from '../../common/endpoint-resolve.ts';
import type { WgInterfaceSpec, WireGuard } from '../../agent/wireguard/types.ts';
import type { AgentSession, BirdConfigResponse, ModifyBody } from '../../common/agent-api.ts';
import { SessionStatus as S } from '../../common/status.ts';
import { basePolicy } from '../agent-policy/policies.ts';

/** A resolver that answers from a table, as /etc/hosts would. */
const table =
  (names: Record<string, string[]>): Resolve =>
  async (host) => {
    const found = names[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found;
  };

describe('resolveEndpoint', () => {
  const hosts = table({
    'evil.example': ['127.0.0.1'],
    'metadata.example': ['169.254.169.254'],
    'mixed.example': ['2a01:4f8::1', '::1'],
    'office.example': ['192.168.1.10'],
    'peer.example': ['2a01:4f8::1', '8.8.8.8'],
  });

  it('refuses a name resolving to 127.0.0.1, naming the address and the reason', async () => {
    await expect(resolveEndpoint('evil.example:51820', false, hosts)).rejects.toThrow(
      new EndpointRefused(
        'endpoint evil.example:51820: evil.example resolves to 127.0.0.1, which is a loopback address (127.0.0.0/8): not set on WireGuard',
      ),
    );
    await expect(resolveEndpoint('metadata.example:80', false, hosts)).rejects.toThrow(
      /resolves to 169\.254\.169\.254, which is a link-local address/,
    );
  });

  it('refuses a name when any of its addresses is refused: a later lookup may give that one', async () => {
    await expect(resolveEndpoint('mixed.example:51820', false, hosts)).rejects.toThrow(
      /resolves to ::1, which is the loopback address/,
    );
  });

  it('judges private addresses by the policy flag', async () => {
    await expect(resolveEndpoint('office.example:51820', false, hosts)).rejects.toThrow(
      /which only a routing policy with allowPrivateEndpoints allows/,
    );
    expect(await resolveEndpoint('office.example:51820', true, hosts)).toBe('192.168.1.10:51820');
  });

  it('answers the first address of a good name, and literals as they are', async () => {
    expect(await resolveEndpoint('peer.example:51820', false, hosts)).toBe('[2a01:4f8::1]:51820');
    expect(await resolveEndpoint('8.8.8.8:1', false, hosts)).toBe('8.8.8.8:1');
    await expect(resolveEndpoint('127.0.0.1:22', false, hosts)).rejects.toThrow(
      'endpoint 127.0.0.1:22 is a loopback address (127.0.0.0/8): not set on WireGuard',
    );
  });

  it('gives up on a resolver that never answers', async () => {
    const silent: Resolve = () => new Promise(() => undefined);
    const started = Date.now();
    await expect(resolveEndpoint('slow.example:51820', false, silent, 200)).rejects.toThrow(
      'endpoint slow.example:51820: slow.example does not resolve (no answer within 200 ms)',
    );
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("the system resolver refuses `localhost` before it asks, and reads the machine's hosts file", async () => {
    await expect(resolveEndpoint('localhost:51820', false)).rejects.toThrow(
      'endpoint localhost:51820 names this machine (localhost, a loopback name): not set on WireGuard',
    );
    // every Linux hosts file maps localhost to a loopback address: the system resolver reads it
    expect((await systemResolve('localhost')).some((a) => a === '127.0.0.1' || a === '::1')).toBe(true);
  });
});

describe('a reconcile pass', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const session = (port: number, endpoint: string): AgentSession => ({
    uuid: `00000000-0000-4000-8000-0000000${port}`,
    asn: 4242421234,
    status: S.QUEUED_FOR_SETUP,
    statusName: 'QUEUED_FOR_SETUP',
    interface: `wg_${port}`,
    listenPort: port,
    endpoint,
    publicKey: 'B'.repeat(43) + '=',
    ipv6: 'fd00::2',
    linkLocal: 'fe80::1234',
    ipv4: null,
    mtu: 1420,
    mpbgp: true,
    extendedNextHop: true,
    restartGeneration: 0,
  });

  /**
   * A reconciler on a temp dir with `resolve` as its resolver, WireGuard and BIRD's applier as records of
   * what the agent asked of them (the resolution is what these tests are about, not the kernel).
   */
  async function recordingReconciler(resolve: Resolve) {
    const root = await mkdtemp(join(tmpdir(), 'peerops-endpoint-'));
    dirs.push(root);
    const config = parseConfig(
      {
        server: { listen: '127.0.0.1:0' },
        node: { name: 'r1', id: 1 },
        controlPlane: { url: 'http://127.0.0.1:1', token: 'x'.repeat(32) },
        routing: { peerConfDir: join(root, 'peers'), ibgpConfDir: join(root, 'ibgp.d') },
      },
      'test',
    );
    const ensured: WgInterfaceSpec[] = [];
    const wireguard: WireGuard = {
      readAll: async () => new Map(),
      ensure: async (spec) => {
        ensured.push(spec);
        return { created: true, changes: ['created'] };
      },
      remove: async () => true,
    };
    const reports: ModifyBody[] = [];
    const reconciler = new NodeReconciler({
      config,
      wireguard,
      bird: { protocols: async () => [], restartProtocol: async () => undefined },
      applier: {
        mainPath: join(root, 'bird.conf'),
        apply: async () => ({ writes: 1, configured: true, changed: [] }),
      },
      reporter: { modify: async (body) => void reports.push(body) },
      log: pino({ level: 'silent' }),
      template: async () => 'protocol bgp {{protocol}} { }\n',
      resolve,
    });
    return { reconciler, ensured, reports };
  }

  it('never sets a name resolving to 127.0.0.1: SETUP_FAILED with the reason; a good name goes in as its address', async () => {
    const { reconciler, ensured, reports } = await recordingReconciler(
      table({ 'evil.example': ['127.0.0.1'], 'peer.example': ['2a01:4f8::1'] }),
    );
    const policy: BirdConfigResponse = { ...basePolicy, dn42Asn: 4242420001 };
    const evil = session(20001, 'evil.example:51820');
    const good = session(20002, 'peer.example:51820');
    const pass = await reconciler.pass([evil, good], policy);

    expect(ensured.map((s) => [s.name, s.peer.endpoint])).toEqual([['wg_20002', '[2a01:4f8::1]:51820']]);
    const reason =
      'endpoint evil.example:51820: evil.example resolves to 127.0.0.1, which is a loopback address (127.0.0.0/8): not set on WireGuard';
    expect(pass.failed.get(evil.uuid)).toBe(reason);
    expect(reports.find((r) => r.uuid === evil.uuid)).toMatchObject({
      status: S.SETUP_FAILED,
      message: reason,
    });
  });

  it('a DDNS name whose address changed reaches WireGuard at the next pass, no restart', async () => {
    const names: Record<string, string[]> = { 'home.example': ['2a01:4f8::1'] };
    const { reconciler, ensured } = await recordingReconciler(table(names));
    const policy: BirdConfigResponse = { ...basePolicy, dn42Asn: 4242420001 };
    const home = session(20003, 'home.example:51820');
    await reconciler.pass([home], policy);
    // the peer's line got a new address overnight; the session and its spec are unchanged
    names['home.example'] = ['2a01:4f8::2'];
    await reconciler.pass([home], policy);
    expect(ensured.map((spec) => spec.peer.endpoint)).toEqual(['[2a01:4f8::1]:51820', '[2a01:4f8::2]:51820']);
  });
});
