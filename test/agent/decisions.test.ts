/**
 * The reconcile decisions as tables (agent/reconcile/decisions.ts): retry backoff, blame of a BIRD
 * refusal, status verdicts. Pure functions: no root, no BIRD, no WireGuard, milliseconds. The last block
 * runs whole NodeReconciler passes with WireGuard and BIRD as test doubles (the steps call them through
 * their interfaces) to show the steps wire the decisions in; the real ones are the netns tests'.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { AgentSession, BirdConfigResponse, ModifyBody } from '../../common/agent-api.ts';
import { SessionStatus as S, type SessionStatusCode } from '../../common/status.ts';
import type { ApplyFailure, ApplyResult } from '../../agent/bird/apply.ts';
import type { ProtocolInfo } from '../../agent/bird/control.ts';
import { parseConfig } from '../../agent/config.ts';
import {
  blame,
  DEFAULT_GRACE_MS,
  endpointToSet,
  HANDSHAKE_FRESH_S,
  judge,
  nextRetry,
  retryDecision,
  retryDelayMs,
  type SessionFacts,
  type SessionMemory,
} from '../../agent/reconcile/decisions.ts';
import { NodeReconciler } from '../../agent/reconcile/node-reconciler.ts';
import type { WgInterfaceState } from '../../agent/wireguard/read.ts';
import type { WireGuard } from '../../agent/wireguard/types.ts';
import { basePolicy } from '../agent-policy/policies.ts';

describe('retry backoff', () => {
  it.each([
    [1, 5000],
    [2, 10_000],
    [3, 20_000],
    [6, 160_000],
    [7, 300_000],
    [30, 300_000],
  ])('attempt %i waits %i ms', (attempts, ms) => expect(retryDelayMs(attempts)).toBe(ms));

  it('counts attempts, waits until due, forgets on a changed session', () => {
    const first = nextRetry(undefined, 'boom', 'fp1', 1000);
    expect(first).toEqual({ attempts: 1, until: 6000, message: 'boom', fingerprint: 'fp1' });
    const second = nextRetry(first, 'boom', 'fp1', 6000);
    expect(second).toMatchObject({ attempts: 2, until: 16_000 });
    expect(retryDecision(second, 'fp1', 15_999)).toBe('wait');
    expect(retryDecision(second, 'fp1', 16_000)).toBe('retry');
    expect(retryDecision(second, 'fp2', 7000)).toBe('forget');
    expect(retryDecision(undefined, 'fp1', 7000)).toBe('none');
  });
});

describe('blame of a BIRD refusal', () => {
  const main = '/etc/bird/bird.conf';
  const owners = new Map([
    ['/etc/bird/peers/dn42_20001.conf', 'u1'],
    ['/etc/bird/peers/dn42_20002.conf', 'u2'],
  ]);
  it.each<[string, { message: string; blamed: string[]; unreachable?: boolean }, unknown]>([
    [
      "a session's own file: that session only",
      {
        message: '/etc/bird/peers/dn42_20002.conf:3:5 syntax error',
        blamed: ['/etc/bird/peers/dn42_20002.conf'],
      },
      { sessions: ['u2'] },
    ],
    [
      "an operator's local.d file: the node, no session",
      { message: '/etc/bird/local.d/own.conf:7:1 syntax error', blamed: ['/etc/bird/local.d/own.conf'] },
      {
        sessions: [],
        node: {
          reason: 'LocalConfigRejected',
          file: '/etc/bird/local.d/own.conf',
          line: 7,
          message: '/etc/bird/local.d/own.conf:7:1 syntax error',
        },
      },
    ],
    [
      'a local.d protocol named like a running session: the local.d file is named, no session is blamed',
      {
        message: '/etc/bird/local.d/x.conf:1:22 Protocol dn42_20001 already exists',
        blamed: ['/etc/bird/local.d/x.conf'],
      },
      { sessions: [], node: { reason: 'LocalConfigRejected', file: '/etc/bird/local.d/x.conf', line: 1 } },
    ],
    [
      'the main config: the node',
      { message: '/etc/bird/bird.conf:1:0 syntax error, unexpected END', blamed: [main] },
      { sessions: [], node: { reason: 'MainConfigRejected', file: main, line: 1 } },
    ],
    [
      'no file named: the node, no session',
      { message: 'Cannot bind socket', blamed: [] },
      { sessions: [], node: { reason: 'BirdRefused', message: 'Cannot bind socket' } },
    ],
    [
      'BIRD not answering: nobody',
      { message: 'BIRD control socket /run/bird/bird.ctl: connect ENOENT', blamed: [], unreachable: true },
      { sessions: [] },
    ],
  ])('%s', (_, refusal, expected) => {
    const result = blame(refusal, owners, main);
    expect(result).toMatchObject(expected as object);
    if (!('node' in (expected as object))) expect(result.node).toBeUndefined();
  });

  it.each([
    ['BIRD 2.0', "/etc/bird/local.d/x.conf:3:28 Symbol 'dn42_20001' already defined"],
    ['older BIRD', '/etc/bird/local.d/x.conf:1:22 Protocol dn42_20001 already exists'],
  ])('a local.d protocol named like a session being set up (%s): that session only', (_, message) => {
    const setupNames = new Map([
      ['dn42_20001', 'u1'],
      ['dn42_20001_v4', 'u1'],
    ]);
    const result = blame({ message, blamed: ['/etc/bird/local.d/x.conf'] }, owners, main, setupNames);
    expect(result).toEqual({ sessions: ['u1'] });
  });
});

describe('the endpoint a pass gives WireGuard (roaming kept while the tunnel lives)', () => {
  const now = 1_800_000_000;
  const configured = '[2a01:4f8::1]:51820';
  const roamed = '[2a01:4f8::1]:40123';
  const fresh = now - 10;
  const quiet = now - HANDSHAKE_FRESH_S - 1;
  it.each([
    [
      'no endpoint configured (a peer behind NAT)',
      undefined,
      undefined,
      { endpoint: roamed, latestHandshake: fresh },
      undefined,
    ],
    ['a new link or peer: WireGuard has none', configured, undefined, undefined, configured],
    [
      'a peer WireGuard holds without an endpoint',
      configured,
      configured,
      { endpoint: undefined, latestHandshake: 0 },
      configured,
    ],
    [
      'roamed, the tunnel live: left where WireGuard found the peer',
      configured,
      configured,
      { endpoint: roamed, latestHandshake: fresh },
      undefined,
    ],
    [
      'roamed, the tunnel quiet: the configured one again',
      configured,
      configured,
      { endpoint: roamed, latestHandshake: quiet },
      configured,
    ],
    [
      'roamed, never a handshake: the configured one',
      configured,
      configured,
      { endpoint: roamed, latestHandshake: 0 },
      configured,
    ],
    [
      'a modify or a new DNS answer: given at once, live or not',
      '[2a01:4f8::2]:51820',
      configured,
      { endpoint: roamed, latestHandshake: fresh },
      '[2a01:4f8::2]:51820',
    ],
    [
      'after an agent restart, a live tunnel: left as it is',
      configured,
      undefined,
      { endpoint: roamed, latestHandshake: fresh },
      undefined,
    ],
    [
      'after an agent restart, a quiet tunnel: the configured one',
      configured,
      undefined,
      { endpoint: roamed, latestHandshake: quiet },
      configured,
    ],
  ] as const)('%s', (_what, wanted, givenLast, peer, expected) => {
    expect(endpointToSet(wanted, givenLast, peer, now)).toBe(expected);
  });
});

describe('status verdicts', () => {
  const T0 = Date.parse('2026-11-25T12:00:00Z');
  const grace = DEFAULT_GRACE_MS;
  const ours = { asn: 4242420001, linkLocal: 'fe80::1' };
  const facts = (
    status: SessionStatusCode,
    over: Partial<SessionFacts> & { bgp?: string | undefined; handshakeAgoS?: number } = {},
  ): SessionFacts => {
    const { bgp, handshakeAgoS, ...rest } = over;
    const now = rest.now ?? T0;
    return {
      session: { status, listenPort: 20001, asn: 4242421234 },
      ours,
      failure: undefined,
      protocol: { bgpState: bgp ?? 'Active', lastError: undefined },
      lastHandshake: handshakeAgoS === undefined ? 0 : Math.floor(now / 1000) - handshakeAgoS,
      memory: undefined,
      now,
      ...rest,
    };
  };
  /** Memory of a session configured at `configuredAt` that has not been Established since. */
  const configured = (
    configuredAt: number,
    wasEstablished = false,
    lastEstablished?: number,
  ): SessionMemory => ({
    configuredAt,
    wasEstablished,
    downSince: wasEstablished ? lastEstablished : configuredAt,
    lastEstablished,
    bgpState: 'Active',
    stateSince: configuredAt,
  });

  it.each<[string, SessionFacts, SessionStatusCode | undefined, RegExp | undefined]>([
    [
      'a new setup, BGP Established → ACTIVE',
      facts(S.QUEUED_FOR_SETUP, { bgp: 'Established' }),
      S.ACTIVE,
      undefined,
    ],
    [
      'a new setup within the grace → 4, reported with its BGP state (the router waits for the peer)',
      facts(S.QUEUED_FOR_SETUP),
      S.QUEUED_FOR_SETUP,
      undefined,
    ],
    [
      'a retried setup that worked, within the grace → 4 (its old error cleared)',
      facts(S.SETUP_FAILED),
      S.QUEUED_FOR_SETUP,
      undefined,
    ],
    [
      'BGP down with a fresh handshake after the grace → ERROR, the BGP hint',
      facts(S.QUEUED_FOR_SETUP, {
        bgp: 'Active',
        handshakeAgoS: 20,
        now: T0 + grace,
        memory: configured(T0),
      }),
      S.ERROR,
      /^WireGuard handshakes \(the tunnel is up\) but BGP Active: check the BGP settings on the peer's side \(neighbor fe80::1 as 4242420001 .*local as 4242421234/,
    ],
    [
      'no handshake after the grace → ERROR, the WireGuard hint',
      facts(S.QUEUED_FOR_SETUP, { bgp: 'Connect', now: T0 + grace, memory: configured(T0) }),
      S.ERROR,
      /^no WireGuard handshake with the peer yet, BGP Connect: check the peer's WireGuard .*port 20001/,
    ],
    [
      'a stale handshake counts as none',
      facts(S.ACTIVE, {
        bgp: 'Active',
        handshakeAgoS: 600,
        now: T0 + 2 * grace,
        memory: configured(T0, true, T0),
      }),
      S.ERROR,
      /^BGP was Established until 2026-11-25T12:00:00.000Z, then lost; no WireGuard handshake since /,
    ],
    [
      'was up, then lost, tunnel still up → ERROR saying so, with BIRD’s last error',
      facts(S.ACTIVE, {
        protocol: { bgpState: 'Idle', lastError: 'Received: Bad peer AS' },
        handshakeAgoS: 10,
        now: T0 + grace,
        memory: configured(T0, true, T0),
      }),
      S.ERROR,
      /^BGP was Established until .*, then lost; WireGuard handshakes .* BGP Idle \(BIRD: Received: Bad peer AS\)/,
    ],
    [
      'ACTIVE, BGP lost (the peer stopped BIRD, tunnel up) → ERROR at once, the BGP hint',
      facts(S.ACTIVE, { bgp: 'Active', handshakeAgoS: 5, now: T0 + 1, memory: configured(T0, true, T0) }),
      S.ERROR,
      /^BGP was Established until .*, then lost; WireGuard handshakes \(the tunnel is up\) but BGP Active: check the BGP settings/,
    ],
    [
      'ACTIVE, BGP still Established but no handshake for longer than WireGuard accepts → ERROR, the WireGuard hint',
      facts(S.ACTIVE, { bgp: 'Established', handshakeAgoS: 181, memory: configured(T0, true, T0) }),
      S.ERROR,
      /no WireGuard handshake since .*, BGP still Established until its hold timer runs out: check the peer's WireGuard/,
    ],
    [
      'ACTIVE, its tunnel deleted and made anew this pass → ERROR, the WireGuard hint',
      facts(S.ACTIVE, { bgp: 'Idle', tunnelRecreated: true, memory: configured(T0, true, T0) }),
      S.ERROR,
      /the router's WireGuard tunnel wg_20001 was gone and was made anew at 2026-.*: it comes back by itself/,
    ],
    [
      'BIRD does not answer, running session → ERROR naming BIRD',
      facts(S.ACTIVE, { protocol: undefined, birdDown: 'connect ENOENT /run/bird/bird.ctl' }),
      S.ERROR,
      /^BIRD on the router does not answer \(connect ENOENT \/run\/bird\/bird.ctl\)/,
    ],
    [
      'BIRD does not answer, a session not set up yet → no verdict',
      facts(S.QUEUED_FOR_SETUP, { protocol: undefined, birdDown: 'timed out' }),
      undefined,
      undefined,
    ],
    [
      'recovery: ERROR, BGP Established → ACTIVE, no message',
      facts(S.ERROR, { bgp: 'Established' }),
      S.ACTIVE,
      undefined,
    ],
    [
      'a setup failure of a running session → ERROR with its words',
      facts(S.ACTIVE, { failure: 'wg_20001: wg set failed' }),
      S.ERROR,
      /^wg_20001: wg set failed$/,
    ],
    [
      'a setup failure of a new session → SETUP_FAILED',
      facts(S.QUEUED_FOR_SETUP, { failure: 'x' }),
      S.SETUP_FAILED,
      /^x$/,
    ],
    [
      'BIRD unreadable (no protocol) → no verdict',
      facts(S.ACTIVE, { protocol: undefined }),
      undefined,
      undefined,
    ],
  ])('%s', (_, f, status, message) => {
    const v = judge(f, grace);
    expect(v.status).toBe(status);
    if (message) expect(v.message).toMatch(message);
    else expect(v.message).toBeUndefined();
  });

  it('each ERROR verdict carries its catalogue key and parameters (docs/api.md, Message keys)', () => {
    const keyed = (f: SessionFacts) => judge(f, grace).keyed;
    const memory = configured(T0, true, T0);
    expect(keyed(facts(S.ACTIVE, { bgp: 'Active', handshakeAgoS: 5, now: T0 + 1, memory }))).toEqual({
      key: 'lastError.bgpDown',
      params: { neighbor: 'fe80::1', asn: '4242420001', peerAsn: '4242421234' },
    });
    expect(
      keyed(facts(S.QUEUED_FOR_SETUP, { bgp: 'Connect', now: T0 + grace, memory: configured(T0) })),
    ).toEqual({ key: 'lastError.noHandshake', params: { port: '20001' } });
    expect(keyed(facts(S.ACTIVE, { bgp: 'Idle', tunnelRecreated: true, memory }))).toEqual({
      key: 'lastError.tunnelRecreated',
      params: { interface: 'wg_20001', port: '20001' },
    });
    expect(keyed(facts(S.ACTIVE, { protocol: undefined, birdDown: 'timed out' }))).toEqual({
      key: 'lastError.birdDown',
      params: { reason: 'timed out' },
    });
    expect(keyed(facts(S.ACTIVE, { bgp: 'Established', handshakeAgoS: 5, memory }))).toBeUndefined();
  });

  it('the ERROR message does not change from pass to pass while its cause stays (it is reported on change)', () => {
    const memory = configured(T0);
    const a = judge(facts(S.QUEUED_FOR_SETUP, { handshakeAgoS: 5, now: T0 + grace, memory }), grace);
    const b = judge(facts(S.ERROR, { handshakeAgoS: 95, now: T0 + grace + 90_000, memory: a.memory }), grace);
    expect(b.message).toBe(a.message);
  });

  it('a lost session is ERROR at once, BGP state and since are remembered, and recovery clears the error', () => {
    let memory: SessionMemory | undefined;
    const step = (status: SessionStatusCode, bgp: string, now: number) => {
      const v = judge(facts(status, { bgp, now, handshakeAgoS: 1, memory }), grace);
      memory = v.memory;
      return v;
    };
    expect(step(S.QUEUED_FOR_SETUP, 'Established', T0).status).toBe(S.ACTIVE);
    expect(step(S.ACTIVE, 'Established', T0 + 3_600_000).status).toBe(S.ACTIVE);
    const lost = step(S.ACTIVE, 'Active', T0 + 3_600_000 + 1000);
    expect(memory).toMatchObject({ bgpState: 'Active', stateSince: T0 + 3_600_000 + 1000 });
    expect(lost.status).toBe(S.ERROR);
    expect(lost.message).toMatch(/^BGP was Established until 2026-11-25T13:00:00.000Z, then lost; /);
    const back = step(S.ERROR, 'Established', T0 + 4_000_000 + grace);
    expect(back).toMatchObject({ status: S.ACTIVE, message: undefined });
  });
});

describe('NodeReconciler passes with WireGuard and BIRD as test doubles', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  const session = (port: number, status: SessionStatusCode): AgentSession => ({
    uuid: `00000000-0000-4000-8000-0000000${port}`,
    asn: 4242421234,
    status,
    statusName: 'X' as AgentSession['statusName'],
    interface: `wg_${port}`,
    listenPort: port,
    endpoint: null,
    publicKey: 'B'.repeat(43) + '=',
    ipv6: 'fd00::2',
    linkLocal: 'fe80::1234',
    ipv4: null,
    mtu: 1420,
    mpbgp: true,
    extendedNextHop: true,
    restartGeneration: 0,
  });
  const policy: BirdConfigResponse = { ...basePolicy, dn42Asn: 4242420001 };

  async function rig(refusal: (changed: string[]) => ApplyFailure | undefined) {
    const root = await mkdtemp(join(tmpdir(), 'peerops-decide-'));
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
    const links = new Map<string, WgInterfaceState>();
    const wireguard: WireGuard = {
      readAll: async () => new Map(links),
      ensure: async (spec) => {
        const created = !links.has(spec.name);
        links.set(spec.name, {
          name: spec.name,
          kind: 'tun',
          mtu: spec.mtu,
          up: true,
          multicast: false,
          addrGenModeNone: true,
          addresses: spec.addresses,
          routes: [],
          ownRoutes: [],
          generation: spec.generation,
          wg: { publicKey: 'k', listenPort: spec.listenPort, peers: [] },
        });
        return { created, changes: created ? ['created'] : [] };
      },
      remove: async (name) => links.delete(name),
    };
    const protocols: ProtocolInfo[] = [];
    const reports: ModifyBody[] = [];
    const reconciler = new NodeReconciler({
      config,
      wireguard,
      bird: { protocols: async () => protocols, restartProtocol: async () => undefined },
      applier: {
        mainPath: join(root, 'bird.conf'),
        apply: async (tree): Promise<ApplyResult> => {
          const changed = [...tree.dirs[0]!.files.keys()].map((f) => join(root, 'peers', f));
          const failure = refusal(changed);
          return failure
            ? { writes: 0, configured: false, changed, failure }
            : { writes: 1, configured: true, changed };
        },
      },
      reporter: { modify: async (body) => void reports.push(body) },
      log: pino({ level: 'silent' }),
      template: async () => 'protocol bgp {{protocol}} { }\n',
    });
    return { reconciler, reports, protocols, root, links };
  }

  it('a broken local.d file is a node problem: no session is blamed, each keeps its status', async () => {
    const r = await rig(() => ({
      message: '/etc/bird/local.d/own.conf:2:1 syntax error, unexpected END',
      blamed: ['/etc/bird/local.d/own.conf'],
      changed: [],
      stage: 'check',
    }));
    const sessions = [session(20001, S.ACTIVE), session(20002, S.QUEUED_FOR_SETUP)];
    const pass = await r.reconciler.pass(sessions, policy);
    expect(pass.failed.size).toBe(0);
    expect(pass.node).toMatchObject({
      reason: 'LocalConfigRejected',
      file: '/etc/bird/local.d/own.conf',
      line: 2,
    });
    expect(r.reports.filter((b) => b.status === S.ERROR || b.status === S.SETUP_FAILED)).toEqual([]);
    expect(r.reconciler.nodeProblem?.reason).toBe('LocalConfigRejected');
  });

  it("a refusal of one session's file blames that session only", async () => {
    const r = await rig((changed) => {
      const bad = changed.find((p) => p.endsWith('dn42_20002.conf'));
      return bad ? { message: `${bad}:1:1 syntax error`, blamed: [bad], changed, stage: 'check' } : undefined;
    });
    const pass = await r.reconciler.pass(
      [session(20001, S.QUEUED_FOR_SETUP), session(20002, S.QUEUED_FOR_SETUP)],
      policy,
    );
    expect([...pass.failed.keys()]).toEqual([session(20002, 4).uuid]);
    expect(r.reports).toEqual([
      expect.objectContaining({
        uuid: session(20002, 4).uuid,
        status: S.SETUP_FAILED,
        message: expect.stringMatching(/syntax error/),
      }),
    ]);
    expect(pass.node).toBeUndefined();
  });

  it('reports BGP Established as ACTIVE with bgpState, then nothing while nothing changes', async () => {
    const r = await rig(() => undefined);
    r.protocols.push({
      name: 'dn42_20001',
      proto: 'BGP',
      state: 'up',
      since: '',
      info: '',
      bgpState: 'Established',
      routesImported: 1,
      routesExported: 0,
      lastError: undefined,
    });
    const s = session(20001, S.QUEUED_FOR_SETUP);
    await r.reconciler.pass([s], policy);
    expect(r.reports).toEqual([
      expect.objectContaining({
        uuid: s.uuid,
        status: S.ACTIVE,
        bgpState: 'Established',
        bgpSince: expect.any(String),
      }),
    ]);
    expect(r.reports[0]?.message).toBeUndefined();
    const again = await r.reconciler.pass([{ ...s, status: S.ACTIVE }], policy);
    expect(again.reports).toEqual([]);
  });

  it('BIRD not answering blames nobody and is no node problem', async () => {
    const r = await rig(() => ({
      message: 'BIRD control socket: connect ENOENT',
      blamed: [],
      changed: [],
      stage: 'configure',
      unreachable: true,
    }));
    const pass = await r.reconciler.pass([session(20001, S.ACTIVE)], policy);
    expect(pass).toMatchObject({ node: undefined, birdUnreachable: 'BIRD control socket: connect ENOENT' });
    expect(pass.failed.size).toBe(0);
    expect(r.reports).toEqual([]);
  });
});
