/**
 * Webhook delivery that no receiver can slow for another (docs/notifications.md, "Delivery: one queue
 * per hook"): real receivers on loopback and a real DNS server on a loopback UDP port. A receiver that
 * answers after 10 s and a name whose DNS never answers delay other hooks' deliveries, a peer's and an admin's, by less than
 * 100 ms; a full backlog drops its oldest delivery and counts it; a name that answers a permitted address
 * and then 127.0.0.1 (DNS rebinding) is connected to at the address that was checked, never at the other.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { register } from '../../controller/metrics.ts';
import { Dispatcher, type DispatcherOptions } from '../../controller/notify/deliver.ts';
import { notifierEnv } from '../../controller/notify/notifier.ts';
import { FileWebhooks } from '../../controller/notify/webhooks.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { startDns, type DnsServer } from './dns.ts';
import { eventually, startReceiver, type Receiver } from './receiver.ts';

const SLOW = 4242420001;
const OTHER = 4242420002;

let dir: string;
let hooks: FileWebhooks;
let dispatcher: Dispatcher | undefined;
let log: string;
const closing: (() => Promise<void>)[] = [];

afterEach(async () => {
  // receivers first: a request a receiver still holds then ends, and stop() has nothing to wait for
  for (const close of closing.splice(0).reverse()) await close();
  await dispatcher?.stop();
  dispatcher = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function setUp(opts: Omit<DispatcherOptions, 'webhooks' | 'logger'>): Promise<Dispatcher> {
  dir = await mkdtemp(join(tmpdir(), 'peerops-notify-iso-'));
  hooks = new FileWebhooks(dir);
  log = '';
  const logger = pino({ level: 'debug' }, { write: (line: string) => void (log += line) });
  dispatcher = new Dispatcher({ webhooks: hooks, logger, ...opts });
  return dispatcher;
}

async function receiver(opts?: Parameters<typeof startReceiver>[0]): Promise<Receiver> {
  const rx = await startReceiver(opts);
  closing.push(() => rx.close());
  return rx;
}

async function dns(answer: Parameters<typeof startDns>[0]): Promise<DnsServer> {
  const server = await startDns(answer);
  closing.push(() => server.close());
  return server;
}

const hook = (url: string, asn: number | null) =>
  hooks.create({ url, asn, events: [], createdBy: asn === null ? 'admin' : `AS${asn}` });

let n = 0;
function event(asn: number): NotificationEvent {
  const id = `event-${++n}`;
  return {
    id,
    type: 'session.active',
    occurredAt: new Date().toISOString(),
    session: { uuid: id, name: `as${asn}-fra1`, asn, router: 'fra1', status: 'ACTIVE', lastError: null },
  };
}

/** Milliseconds from publishing `e` until each receiver has it. */
async function latency(d: Dispatcher, e: NotificationEvent, ...rxs: Receiver[]): Promise<number[]> {
  const start = performance.now();
  void d.dispatch(e, await hooks.list());
  const arrived = (rx: Receiver) => rx.received.find((r) => JSON.parse(r.body).id === e.id)?.at;
  await eventually(`${e.id} delivered`, () => rxs.every((rx) => arrived(rx) !== undefined));
  return rxs.map((rx) => (arrived(rx) as number) - start);
}

/** The median of a few deliveries with no troublesome hook about: what "not delayed" is measured against. */
async function baseline(d: Dispatcher, ...rxs: Receiver[]): Promise<number> {
  const all: number[] = [];
  for (let i = 0; i < 7; i++) all.push(...(await latency(d, event(OTHER), ...rxs)));
  return all.sort((a, b) => a - b)[Math.floor(all.length / 2)] as number;
}

async function counted(outcome: string): Promise<number> {
  const metric = (await register.getSingleMetric('peerops_webhook_deliveries_total')?.get())?.values ?? [];
  return metric.filter((v) => v.labels['outcome'] === outcome).reduce((sum, v) => sum + v.value, 0);
}

describe('one hook cannot slow another', () => {
  it("a receiver that answers after 10 s delays neither another peer's delivery nor an admin's", async () => {
    // loopback receivers: peers' hooks may reach them only with the test allowance
    const d = await setUp({ allowPrivateTargets: true });
    const other = await receiver();
    const admin = await receiver();
    await hook(other.url, OTHER);
    await hook(admin.url, null);
    const usual = await baseline(d, other, admin);

    const slow = await receiver({ delayMs: 10_000 });
    await hook(slow.url, SLOW);
    // the case: 12 events of the slow hook's peer, then one of another peer's
    for (let i = 0; i < 12; i++) void d.dispatch(event(SLOW), await hooks.list());
    await eventually('the slow receiver holds a request', () => slow.received.length === 1);
    const [toOther, toAdmin] = await latency(d, event(OTHER), other, admin);
    expect(toOther).toBeLessThan(usual + 100);
    expect(toAdmin).toBeLessThan(usual + 100);
    // the admin's hook had the slow peer's 12 events too, none waiting on the slow receiver
    expect(admin.received.filter((r) => JSON.parse(r.body).session.asn === SLOW)).toHaveLength(12);
    // one request at a time to the slow hook: the other 11 wait in its own queue
    expect(slow.received).toHaveLength(1);
  });

  it('a name whose DNS never answers delays nobody else, and its attempt ends at the DNS timeout', async () => {
    // one DNS server for every peer name: it swallows queries for never.test, answers the others
    const server = await dns((name) => (name === 'never.test' ? undefined : ['127.0.0.1']));
    const d = await setUp({ allowPrivateTargets: true, dnsServers: [server.server] });
    const other = await receiver();
    const admin = await receiver();
    await hook(`http://fast.test:${other.port}/hook`, OTHER);
    await hook(admin.url, null);
    const usual = await baseline(d, other, admin);

    await hook('http://never.test:9/hook', SLOW);
    const start = performance.now();
    for (let i = 0; i < 12; i++) void d.dispatch(event(SLOW), await hooks.list());
    const [toOther, toAdmin] = await latency(d, event(OTHER), other, admin);
    expect(toOther).toBeLessThan(usual + 100);
    expect(toAdmin).toBeLessThan(usual + 100);
    expect(server.queries).toContain('never.test A');

    await eventually('the DNS timeout', () => log.includes('DNS: no answer for never.test within 3000 ms'));
    const waited = performance.now() - start;
    expect(waited).toBeGreaterThanOrEqual(2900);
    expect(waited).toBeLessThan(5000);
    expect(log).toContain('webhook failed; retrying');
  });

  it('bounds the whole request in time', async () => {
    const d = await setUp({ allowPrivateTargets: true, timeoutMs: 300, maxAttempts: 1 });
    const slow = await receiver({ delayMs: 10_000 });
    await hook(slow.url, null);
    const start = performance.now();
    void d.dispatch(event(SLOW), await hooks.list());
    await eventually('given up', () => log.includes('webhook not delivered; giving up'));
    expect(performance.now() - start).toBeLessThan(2000);
    expect(log).toMatch(/"failure":"AbortError/);
  });
});

describe("a hook's backlog", () => {
  it('drops the oldest delivery when full, counts each, logs the burst once', async () => {
    const d = await setUp({ allowPrivateTargets: true, backlog: 3 });
    const rx = await receiver({ delayMs: 60_000 });
    await hook(rx.url, null);
    const before = await counted('overflow');
    const events = Array.from({ length: 6 }, () => event(SLOW));
    for (const e of events) void d.dispatch(e, await hooks.list());
    // the first is under way; 2, 3, 4 filled the backlog; 5 and 6 each pushed out the oldest waiting
    await eventually('the first under way', () => rx.received.length === 1);
    expect((await counted('overflow')) - before).toBe(2);
    expect(log.match(/webhook backlog full/g)).toHaveLength(1);
    expect(register.getSingleMetric('peerops_webhook_deliveries_pending')).toBeDefined();

    rx.release();
    await eventually('the rest delivered', () => rx.received.length === 4);
    const ids = rx.received.map((r) => JSON.parse(r.body).id as string);
    expect(ids).toEqual([0, 3, 4, 5].map((i) => events[i]?.id));
  });
});

describe('DNS rebinding', () => {
  it('connects to the address it checked, and refuses the name once it answers 127.0.0.1', async () => {
    // 127.0.0.2, permitted by the test allowance, stands for the public address a rebinding name first
    // gives; the receiver the attack is after listens on 127.0.0.1 at the same port.
    const allowed = await receiver({ host: '127.0.0.2' });
    const target = await receiver({ host: '127.0.0.1', port: allowed.port });
    const server = await dns((name, type, n) =>
      name !== 'rebind.test' || type === 'AAAA' ? [] : n === 1 ? ['127.0.0.2'] : ['127.0.0.1'],
    );
    const d = await setUp({ allowPrivateTargets: ['127.0.0.2/32'], dnsServers: [server.server] });
    await hook(`http://rebind.test:${allowed.port}/hook`, SLOW);
    const refusedBefore = await counted('refused');

    void d.dispatch(event(SLOW), await hooks.list());
    await eventually('delivered at the checked address', () => allowed.received.length === 1);
    expect(allowed.received[0]?.headers.host).toBe(`rebind.test:${allowed.port}`);
    // resolved once: the connection did not ask again (the second answer would have been 127.0.0.1)
    expect(server.queries.filter((q) => q === 'rebind.test A')).toHaveLength(1);

    void d.dispatch(event(SLOW), await hooks.list());
    await eventually('refused', () =>
      log.includes('rebind.test: 127.0.0.1 is a loopback address (127.0.0.0/8)'),
    );
    expect((await counted('refused')) - refusedBefore).toBe(1);
    expect(target.received).toHaveLength(0);
    expect(allowed.received).toHaveLength(1);
  });
});

describe('PEEROPS_NOTIFY_ALLOW_PRIVATE', () => {
  it('is off, on, or a list of ranges; anything else is refused naming it', () => {
    expect(notifierEnv({})).toEqual({ allowPrivateTargets: false });
    expect(notifierEnv({ PEEROPS_NOTIFY_ALLOW_PRIVATE: 'true' })).toEqual({ allowPrivateTargets: true });
    expect(notifierEnv({ PEEROPS_NOTIFY_ALLOW_PRIVATE: '10.1.0.0/16, fd00:1::/48' })).toEqual({
      allowPrivateTargets: ['10.1.0.0/16', 'fd00:1::/48'],
    });
    expect(() => notifierEnv({ PEEROPS_NOTIFY_ALLOW_PRIVATE: 'yes' })).toThrow(
      'PEEROPS_NOTIFY_ALLOW_PRIVATE: "yes" is not an address range (like 10.1.0.0/16)',
    );
  });
});
