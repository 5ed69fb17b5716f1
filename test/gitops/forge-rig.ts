/**
 * A forge and a stream of user and admin writes against real `peerops serve` processes, for the tests of
 * the push modes (docs/gitops.md, "Push modes"): a bare repository served by `git http-backend` on
 * loopback (test/support/git-http.ts), one JWT key every controller shares (a fresh controller on a new
 * data directory accepts the same tokens), clients that create, approve, modify and delete their own
 * sessions and remember what each answer acknowledged, and the judgement of what a controller serves
 * against it.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TokenIssuer } from '../../controller/auth/jwt.ts';
import { transition } from '../../common/state-machine.ts';
import type { SessionStatusCode } from '../../common/status.ts';
import { ControllerProcess, type Answer } from '../support/controller-process.ts';
import { serveGit, type GitHttpServer } from '../support/git-http.ts';
import { freePort } from '../support/ports.ts';
import { routerFields } from '../api/helpers.ts';

const run = promisify(execFile);
export const ADMIN_ASN = 4242420000;
export const ROUTERS = ['fra1', 'ams1'];

/** A session as the model knows it: status code and MTU (deleted: undefined). */
export interface State {
  status: number;
  mtu: number;
}

export interface Tracked {
  asn: number;
  router: string;
  uuid?: string;
  /** The last acknowledged state, and when it was acknowledged (ms since the epoch). */
  acked: State | undefined;
  ackedAt: number;
  /** A write without a clear answer (killed, or refused with 503): its result, or the acked state. */
  inflight?: { result: State | undefined; op: string };
}

/** A session as the admin list shows it (the fields the model looks at). */
export interface ServedSession {
  uuid: string;
  asn: number;
  router: string;
  status: number;
  mtu: number;
}

export interface Counts {
  acked: number;
  /** Answers 503 (FORGE_UNAVAILABLE, STORE_UNAVAILABLE) and writes cut by a kill. */
  unanswered: number;
  latencies: number[];
}

export class ForgeRig {
  root = '';
  forge!: GitHttpServer;
  issuer!: TokenIssuer;
  private keyFile = '';
  private dirs = 0;

  get url(): string {
    return `${this.forge.url}/upstream.git`;
  }

  get upstream(): string {
    return join(this.root, 'forge', 'upstream.git');
  }

  async open(): Promise<void> {
    this.root = await mkdtemp(join(tmpdir(), 'peerops-forge-push-'));
    await mkdir(join(this.root, 'forge'));
    await run('git', ['init', '-q', '--bare', '-b', 'main', this.upstream]);
    await run('git', ['--git-dir', this.upstream, 'config', 'http.receivepack', 'true']);
    this.forge = await serveGit(join(this.root, 'forge'));
    this.keyFile = join(this.root, 'jwt-ed25519.pem');
    this.issuer = await TokenIssuer.fromFile(this.keyFile);
  }

  async close(): Promise<void> {
    await this.forge?.close();
    if (this.root) await rm(this.root, { recursive: true, force: true });
  }

  /** A controller on a new, empty data directory following the forge (the documented recovery). */
  async controller(
    mode: 'sync' | 'async',
    extra: string[] = [],
  ): Promise<{ proc: ControllerProcess; data: string }> {
    const data = join(this.root, `data-${++this.dirs}`);
    await mkdir(data, { mode: 0o700 });
    const proc = new ControllerProcess(data, await freePort(), { PEEROPS_JWT_KEY_FILE: this.keyFile }, [
      '--git-remote',
      this.url,
      '--git-push-mode',
      mode,
      ...extra,
    ]);
    return { proc, data };
  }

  userToken(asn: number): string {
    return this.issuer.issueToken(asn, 'user').token;
  }

  adminToken(n = 0): string {
    return this.issuer.issueToken(ADMIN_ASN + n, 'admin').token;
  }

  /** The policy and the routers, through the API. */
  async network(c: ControllerProcess): Promise<void> {
    const admin = this.adminToken();
    const policy = await c.post(admin, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
    if (policy.status !== 200) throw new Error(`policy: ${JSON.stringify(policy.body)}`);
    for (const name of ROUTERS) {
      const added = await c.post(admin, '/admin/router', { action: 'add', ...routerFields(name) });
      if (added.status !== 200) throw new Error(`router ${name}: ${JSON.stringify(added.body)}`);
    }
  }

  async forgeHead(branch: string): Promise<string | undefined> {
    return run('git', ['--git-dir', this.upstream, 'rev-parse', '--verify', '-q', branch]).then(
      (r) => r.stdout.trim(),
      () => undefined,
    );
  }

  /** Until the controller's refs are the forge's (it took both branches), then what it serves. */
  async caughtUp(c: ControllerProcess, dataDir: string): Promise<void> {
    const gitdir = join(dataDir, 'store.git');
    const local = (ref: string) =>
      run('git', ['--git-dir', gitdir, 'rev-parse', '--verify', '-q', ref]).then(
        (r) => r.stdout.trim(),
        () => undefined,
      );
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [main, status] = [await this.forgeHead('main'), await this.forgeHead('peerops-status')];
      if (main === (await local('main')) && status === (await local('peerops-status'))) break;
      if (Date.now() > deadline) throw new Error(`the controller never caught up:\n${c.output.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // the index follows the refs in the same step of the write queue; a read after one more turn sees it
    await new Promise((r) => setTimeout(r, 200));
  }

  /**
   * Until no `git http-backend` has run for 300 ms. A push whose controller was killed after sending
   * its pack is still landing on the forge; `git fsck` reading objects before it and refs after it
   * would report the new commit as missing.
   */
  async quiet(): Promise<void> {
    const deadline = Date.now() + 30_000;
    let since = Date.now();
    while (Date.now() - since < 300) {
      if (this.forge.running > 0) since = Date.now();
      if (Date.now() > deadline) throw new Error(`the forge never went quiet: ${this.forge.running} running`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** `git fsck --full` of the forge's repository once it is quiet: its findings, empty when clean. */
  async fsck(): Promise<string> {
    await this.quiet();
    try {
      const out = await run('git', [
        '--git-dir',
        this.upstream,
        'fsck',
        '--full',
        '--no-dangling',
        '--no-progress',
      ]);
      return /error|missing|broken|corrupt/i.test(out.stderr) ? `${out.stdout}${out.stderr}` : '';
    } catch (e) {
      const failed = e as { stdout?: string; stderr?: string; message: string };
      return `${failed.message}\n${failed.stdout ?? ''}${failed.stderr ?? ''}`;
    }
  }

  /** Every session the controller serves, by ASN. */
  async served(c: ControllerProcess): Promise<Map<number, ServedSession>> {
    const listed = await c.post(this.adminToken(), '/admin/session', { action: 'list' });
    if (listed.status !== 200) throw new Error(`list: ${JSON.stringify(listed.body)}`);
    const sessions = listed.body.sessions as ServedSession[];
    return new Map(sessions.map((s) => [s.asn, s]));
  }
}

/** The sessions of `workers` clients, `each` per client, spread over the routers. */
export function sessionsFor(workers: number, each: number, firstAsn: number): Tracked[][] {
  return Array.from({ length: workers }, (_, w) =>
    Array.from({ length: each }, (_, k) => ({
      asn: firstAsn + w * 100 + k,
      router: ROUTERS[k % ROUTERS.length] as string,
      acked: undefined,
      ackedAt: 0,
    })),
  );
}

function after(state: State, trigger: Parameters<typeof transition>[1], mtu = state.mtu): State | undefined {
  const outcome = transition(state.status as SessionStatusCode, trigger);
  return outcome.result === 'removed' ? undefined : { status: outcome.to, mtu };
}

/**
 * One client: user and admin writes on its own sessions, one at a time, until `stop` (or until the
 * controller dies under it): create; then approve, modify or delete while pending review; modify once
 * approved.
 */
export async function writer(
  rig: ForgeRig,
  c: () => ControllerProcess,
  id: number,
  sessions: Tracked[],
  stop: { now: boolean },
  counts: Counts,
): Promise<void> {
  const admin = rig.adminToken(id + 1);
  while (!stop.now) {
    const open = sessions.filter((t) => !t.inflight);
    if (open.length === 0) return;
    const s = open[Math.floor(Math.random() * open.length)] as Tracked;
    const state = s.acked;
    const roll = Math.random();
    let op: string;
    let result: State | undefined;
    let body: Record<string, unknown>;
    let token = rig.userToken(s.asn);
    let path = '/session';
    if (!state) {
      op = 'create';
      result = { status: 3, mtu: 1420 };
      body = {
        action: 'create',
        router: s.router,
        ipv6: `fd42:${s.asn.toString(16).slice(-4)}::1`,
        linkLocal: 'fe80::1234',
        publicKey: randomBytes(32).toString('base64'),
        mtu: 1420,
      };
    } else if (state.status === 3 && roll < 0.4) {
      op = 'approve';
      result = after(state, { kind: 'approve' });
      token = admin;
      path = '/admin/session';
      body = { action: 'approve', uuid: s.uuid };
    } else if (state.status === 3 && roll > 0.8) {
      op = 'delete';
      result = after(state, { kind: 'delete' });
      body = { action: 'delete', uuid: s.uuid };
    } else {
      op = 'modify';
      const mtu = 1280 + Math.floor(Math.random() * 140);
      result = mtu === state.mtu ? state : after(state, { kind: 'modify' }, mtu);
      body = { action: 'modify', uuid: s.uuid, mtu };
    }
    s.inflight = { result, op };
    const t0 = Date.now();
    let answer: Answer;
    try {
      answer = await c().post(token, path, body);
    } catch {
      counts.unanswered++;
      return; // killed: judged after the restart
    }
    if (answer.status === 200) {
      s.inflight = undefined;
      counts.acked++;
      counts.latencies.push(Date.now() - t0);
      if (op === 'create') s.uuid = answer.body.uuid as string;
      s.acked = result;
      s.ackedAt = Date.now();
    } else if (answer.status === 503) {
      counts.unanswered++; // not acknowledged: nothing of it, or (a crash's) all of it, after a restart
    } else if (answer.status !== 429) {
      throw new Error(`${op}: ${answer.status} ${JSON.stringify(answer.body)}`);
    } else s.inflight = undefined;
  }
}

const same = (a: State | undefined, b: State | undefined) =>
  a === undefined ? b === undefined : b !== undefined && a.status === b.status && a.mtu === b.mtu;

/**
 * What a controller serves against the model: each session must be as acknowledged, or as its write in
 * flight would have left it (which then counts as acknowledged). Returns the sessions that are neither.
 */
export function judge(sessions: Tracked[], served: Map<number, ServedSession>): Tracked[] {
  const lost: Tracked[] = [];
  for (const s of sessions) {
    const now = served.get(s.asn);
    const state = now ? { status: now.status, mtu: now.mtu } : undefined;
    if (same(state, s.acked) && (!now || !s.acked || now.uuid === s.uuid)) {
      s.inflight = undefined;
      continue;
    }
    if (s.inflight && same(state, s.inflight.result)) {
      if (now) s.uuid = now.uuid;
      s.acked = state;
      s.inflight = undefined;
      continue;
    }
    lost.push(s);
  }
  return lost;
}

export const percentile = (xs: number[], p: number): number =>
  xs.length === 0 ? 0 : ([...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)] as number);
