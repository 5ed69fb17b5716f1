/**
 * `POST /session` action `config` and `peerops session config` against a listening controller on the
 * git store: the answer's files, who may ask, the refusals, and the CLI's printing and `--out`.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRIVATE_KEY_PLACEHOLDER } from '../../common/peer-config/index.ts';
import {
  expectOk,
  problem,
  sessionFields,
  startHarness,
  USER_ASN,
  wgKey,
  type Harness,
} from '../api/helpers.ts';
import { runCli } from '../cli/run.ts';

const NETWORK_ASN = 4242420000;

let h: Harness;
let url: string;
let home: string;
let uuid: string;

const peerops = (args: string[], token: string) => runCli(args, { url, home, token });

/** The gid of a group, as `getent` finds it; undefined where the machine has none. */
async function groupId(name: string): Promise<number | undefined> {
  const found = await promisify(execFile)('getent', ['group', name]).catch(() => undefined);
  return found ? Number(found.stdout.split(':')[2]) : undefined;
}

const config = (token: string, body: Record<string, unknown>) =>
  h.post('/session', token, { action: 'config', uuid, ...body });

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-peercfg-cli-'));
  await h.addRouter('fra1');
  const res = await expectOk(h.post('/session', h.user, sessionFields('fra1', { ipv4: '172.22.1.1' })));
  uuid = (res.json() as { uuid: string }).uuid;
});
afterAll(async () => {
  await h?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('POST /session action config', () => {
  it("is refused while the network's ASN is unknown (policy without dn42Asn)", async () => {
    const p = problem(await config(h.user, { format: 'bird' }));
    expect(p).toMatchObject({ status: 409, code: 'INVALID_STATE' });
    expect(p.detail).toContain('dn42Asn');
  });

  it('answers each format with the session, router and network ASN in it', async () => {
    await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: NETWORK_ASN } }));
    const router = h.store.getRouter('fra1');
    const answers = new Map<string, { format: string; files: { name: string; content: string }[] }>();
    for (const format of ['wg-quick', 'networkd', 'bird', 'frr'])
      answers.set(format, (await expectOk(config(h.user, { format }))).json());
    expect(answers.get('wg-quick')).toMatchObject({
      format: 'wg-quick',
      files: [{ name: 'peerops-fra1.conf' }],
    });
    expect(answers.get('networkd')?.files.map((f) => f.name)).toEqual([
      'peerops-fra1.netdev',
      'peerops-fra1.network',
    ]);
    const wg = answers.get('wg-quick')?.files[0]?.content ?? '';
    expect(wg).toContain(`PrivateKey = ${PRIVATE_KEY_PLACEHOLDER}`);
    expect(wg).toContain(`PublicKey = ${router?.spec.publicKey}`);
    expect(wg).toContain(`Endpoint = fra1.example.net:${h.store.getSession(uuid)?.spec.listenPort}`);
    expect(wg).toContain(
      `PostUp = ip -4 address add 172.22.1.1/32 peer ${router?.spec.loopback.ipv4}/32 dev %i`,
    );
    const bird = answers.get('bird')?.files[0]?.content ?? '';
    expect(bird).toContain(`local as ${USER_ASN};`);
    expect(bird).toContain(`neighbor fe80::1 % 'peerops-fra1' as ${NETWORK_ASN};`);
    expect(bird).toContain('extended next hop on;');
    expect(answers.get('frr')?.files[0]?.content).toContain(`router bgp ${USER_ASN}\n`);
  });

  it("is another ASN's session not found; an admin gets it", async () => {
    expect(problem(await config(h.other, { format: 'bird' }))).toMatchObject({ code: 'SESSION_NOT_FOUND' });
    await expectOk(config(h.admin, { format: 'bird' }));
  });

  it('refuses an unknown format naming the field', async () => {
    const res = await config(h.user, { format: 'openvpn' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'INVALID_REQUEST',
      errors: [expect.objectContaining({ pointer: '/format' })],
    });
  });
});

describe('peerops session config', () => {
  it('is offered by create', async () => {
    const r = await peerops(
      [
        'session',
        'create',
        '--router',
        'fra1',
        '--ipv6',
        'fd42:1234::77',
        '--link-local',
        'fe80::77',
        '--public-key',
        wgKey(),
      ],
      h.tokens.issueToken(USER_ASN + 1, 'user').token,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /or get the files: peerops session config [0-9a-f-]{36} --format wg-quick\|networkd\|bird\|frr/,
    );
  });

  it('prints the file for a UUID prefix', async () => {
    const r = await peerops(['session', 'config', uuid.slice(0, 8), '--format', 'bird'], h.user);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`neighbor fe80::1 % 'peerops-fra1' as ${NETWORK_ASN};`);
  });

  it.each([
    ['networkd', ['peerops-fra1.netdev', 'peerops-fra1.network'], 'systemd-network', 'systemd-networkd'],
    ['bird', ['peerops-fra1.bird.conf'], 'bird', 'BIRD'],
  ])(
    'writes the %s files into --out, 640 in the group of the daemon that reads them, and says so',
    async (format, names, group, daemon) => {
      const out = join(home, `out-${format}`);
      const gid = await groupId(group);
      const r = await peerops(['session', 'config', uuid, '--format', format, '--out', out], h.user);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      for (const name of names) {
        const path = join(out, name);
        const st = await stat(path);
        if (gid === undefined) {
          // a machine without the daemon's group: owner-only, and the line says what to do
          expect(st.mode & 0o777).toBe(0o600);
          expect(r.stdout).toContain(`wrote ${path} (mode 600: there is no group ${group} here`);
        } else {
          expect({ mode: st.mode & 0o777, gid: st.gid }).toEqual({ mode: 0o640, gid });
          expect(r.stdout).toContain(`wrote ${path} (mode 640, group ${group}: ${daemon} can read it)`);
          // read as the daemon's user would (Debian's BIRD runs as bird:bird): its group lets it
          if (format === 'bird') {
            await chmod(home, 0o711);
            const asBird = ['--reuid=bird', '--regid=bird', '--init-groups', 'head', '-c', '9', path];
            expect((await promisify(execFile)('setpriv', asBird)).stdout).toBe('# peerops');
          }
        }
      }
    },
  );

  it('writes the wg-quick file owner-only, and a rerun keeps the mode a file was given', async () => {
    const out = join(home, 'out-rerun');
    const conf = join(out, 'peerops-fra1.conf');
    const first = await peerops(['session', 'config', uuid, '--format', 'wg-quick', '--out', out], h.user);
    expect(first.stdout).toBe(`wrote ${conf} (mode 600: it will hold your private key)\n`);
    expect((await stat(conf)).mode & 0o777).toBe(0o600);
    // the operator's choice (another group, a key put in): a rerun must not reset it
    await chmod(conf, 0o640);
    const again = await peerops(['session', 'config', uuid, '--format', 'wg-quick', '--out', out], h.user);
    expect(again.stdout).toBe(`wrote ${conf} (kept its mode 640 and owner)\n`);
    expect((await stat(conf)).mode & 0o777).toBe(0o640);
    expect(await readFile(conf, 'utf8')).toContain(`PrivateKey = ${PRIVATE_KEY_PLACEHOLDER}`);
  });

  it('names the formats for an unknown or missing --format', async () => {
    const unknown = await peerops(['session', 'config', uuid, '--format', 'bird2'], h.user);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("'bird'");
    const missing = await peerops(['session', 'config', uuid], h.user);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--format wg-quick|networkd|bird|frr');
  });
});
