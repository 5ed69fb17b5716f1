/**
 * `peerops validate` as CI runs it (docs/gitops.md): files outside the layout, `--base` judging the merge
 * against the base branch's tree, `--format github` annotations and `--format json`.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { main, pointerLine, type JsonReport } from '../../cli/validate.ts';

const exec = promisify(execFile);
const good = resolve(import.meta.dirname, '../fixtures/validate/good');

async function capture(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  try {
    return { code: await main(argv), out, err };
  } finally {
    vi.restoreAllMocks();
  }
}

const session = (asn: number, router: string, extra = '') => `apiVersion: peerops.dev/v1alpha1
kind: PeeringSession
metadata:
  name: as${asn}-${router}
spec:
  asn: ${asn}
  router: ${router}
  ipv6: fd42:${(asn % 65536).toString(16)}::1
  linkLocal: fe80::${(asn % 65536).toString(16)}
  publicKey: ${Buffer.alloc(32, asn % 251).toString('base64')}
${extra}`;

let dir: string;
async function git(...args: string[]): Promise<string> {
  return (await exec('git', args, { cwd: dir })).stdout.trim();
}
async function commit(message: string): Promise<void> {
  await git('add', '-A');
  await git('-c', 'user.name=Test', '-c', 'user.email=test@example.net', 'commit', '-q', '-m', message);
}

afterEach(() => vi.restoreAllMocks());

describe('peerops validate: files outside the layout', () => {
  it('reports a YAML file outside the layout, and one in a manifest directory, but not CI or other files', async () => {
    const root = await mkdtemp(join(tmpdir(), 'peerops-validate-'));
    try {
      await cp(good, root, { recursive: true });
      await mkdir(join(root, '.github/workflows'), { recursive: true });
      await writeFile(join(root, '.github/workflows/validate.yml'), 'on: [pull_request]\n');
      await mkdir(join(root, '.forgejo/workflows'), { recursive: true });
      await writeFile(join(root, '.forgejo/workflows/validate.yaml'), 'on: [pull_request]\n');
      await writeFile(join(root, 'notes.txt'), 'not a manifest\n');
      await writeFile(join(root, 'fra1.yaml'), 'kind: Router\n');
      await mkdir(join(root, 'session/fra1'), { recursive: true });
      await writeFile(join(root, 'session/fra1/as64600.yml'), session(64600, 'fra1'));
      await writeFile(join(root, 'policy/fra1.yml'), 'kind: RoutingPolicy\n');
      const { code, out } = await capture([root]);
      expect(code).toBe(1);
      const layout =
        'is outside the repository layout (routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml)';
      expect(out.filter((l) => l.includes(': /'))).toEqual([
        `fra1.yaml: /: ${layout}: the store never reads it; move it, or give it another extension`,
        'policy/fra1.yml: /: file path is not part of the layout (routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml)',
        `session/fra1/as64600.yml: /: ${layout}: the store never reads it; move it, or give it another extension`,
      ]);
      expect(
        out.some((l) => l.includes('.github') || l.includes('.forgejo') || l.includes('notes.txt')),
      ).toBe(false);
      expect(out).toContain('routers/fra1.yaml: ok');
      expect(out).toContain('fra1.yaml: 1 problem');
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('peerops validate --base', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-validate-base-'));
    await git('init', '-q', '-b', 'main');
    await cp(good, dir, { recursive: true });
    // a policy file the base has wrong: not this change's business
    await writeFile(join(dir, 'policy/ams1.yaml'), 'kind: RoutingPolicy\n');
    await commit('a network');
    await git('checkout', '-q', '-b', 'feature');
    await writeFile(join(dir, 'sessions/fra1/as64601.yaml'), session(64601, 'fra1', '  listenPort: 30500\n'));
    await writeFile(join(dir, 'sessions/fra1/as4242420005.yaml'), session(4242420005, 'fra1'));
    await commit('two sessions');
    // meanwhile, on main: two sessions that take both ports
    await git('checkout', '-q', 'main');
    await writeFile(join(dir, 'sessions/fra1/as64602.yaml'), session(64602, 'fra1', '  listenPort: 30500\n'));
    await writeFile(join(dir, 'sessions/fra1/as64603.yaml'), session(64603, 'fra1', '  listenPort: 20005\n'));
    await commit('taken meanwhile');
    await git('checkout', '-q', 'feature');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('passes the branch on its own, but reports the port clash with what the base has since', async () => {
    expect((await capture([dir])).out.filter((l) => l.includes('sessions/fra1/as6460'))).toEqual([
      'sessions/fra1/as64601.yaml: ok',
    ]);
    const { code, out, err } = await capture(['--base', 'main', dir]);
    expect(code).toBe(1);
    expect(out).toEqual([
      'sessions/fra1/as4242420005.yaml: /spec/listenPort: router fra1 has no free listen port: AS4242420005 gets port 20005 (20000 + ASN % 10000), already used by session as64603-fra1',
      'sessions/fra1/as64601.yaml: /spec/listenPort: port 30500 on router fra1 is already used by session as64602-fra1',
      'sessions/fra1/as4242420005.yaml: 1 problem',
      'sessions/fra1/as64601.yaml: 1 problem',
    ]);
    // the base's own broken policy/ams1.yaml, and as64602 (unchanged: it clashed only once merged), are not this change's
    expect(err).toEqual([
      'peerops validate: 2 problem(s); checked 2 files against main; 2 router(s), 7 session(s), 2 policy file(s) after the merge',
    ]);
  });

  it('judges uncommitted and untracked changes, and names an unchanged file the change breaks', async () => {
    await rm(join(dir, 'routers/ams1.yaml'));
    await writeFile(
      join(dir, 'sessions/fra1/as4242420005.yaml'),
      session(4242420005, 'fra1', '  listenPort: 30600\n'),
    );
    await writeFile(join(dir, 'sessions/fra1/as64601.yaml'), session(64601, 'fra1', '  listenPort: 30601\n'));
    await writeFile(join(dir, 'sessions/fra1/as64604.yaml'), session(64604, 'fra1', '  listenPort: 30601\n'));
    try {
      const { code, out } = await capture(['--base', 'main', dir]);
      expect(code).toBe(1);
      const broken = '(the file is unchanged: this change breaks it)';
      expect(out).toEqual([
        `sessions/ams1/as4242420001.yaml: /spec/router: names an unknown router 'ams1' ${broken}`,
        `sessions/ams1/as64512.yaml: /spec/router: names an unknown router 'ams1' ${broken}`,
        'sessions/fra1/as64601.yaml: /spec/listenPort: port 30601 on router fra1 is already used by session as64604-fra1',
        'sessions/fra1/as64604.yaml: /spec/listenPort: port 30601 on router fra1 is already used by session as64601-fra1',
        'sessions/ams1/as4242420001.yaml: 1 problem',
        'sessions/ams1/as64512.yaml: 1 problem',
        'sessions/fra1/as4242420005.yaml: ok',
        'sessions/fra1/as64601.yaml: 1 problem',
        'sessions/fra1/as64604.yaml: 1 problem',
      ]);
    } finally {
      await git('checkout', '-q', '--', '.');
      await rm(join(dir, 'sessions/fra1/as64604.yaml'));
    }
  });

  it('passes a change that merges cleanly, and says a base it cannot find is a usage error', async () => {
    await git('rm', '-q', 'sessions/fra1/as64601.yaml', 'sessions/fra1/as4242420005.yaml');
    await writeFile(join(dir, 'sessions/fra1/as64605.yaml'), session(64605, 'fra1'));
    try {
      const ok = await capture(['--base', 'main', dir]);
      expect(ok.code).toBe(0);
      expect(ok.out).toEqual([
        'sessions/fra1/as64605.yaml: ok',
        'peerops validate: ok: checked 1 file against main; 2 router(s), 6 session(s), 2 policy file(s) after the merge',
      ]);
      const missing = await capture(['--base', 'origin/nothing', dir]);
      expect(missing.code).toBe(2);
      expect(missing.err.join('\n')).toMatch(/origin\/nothing is not a commit .*fetch-depth: 0/);
    } finally {
      await git('reset', '-q', '--hard');
      await rm(join(dir, 'sessions/fra1/as64605.yaml'));
    }
  });

  it('writes GitHub annotations at the line of the offending key', async () => {
    const { code, out } = await capture(['--base', 'main', '--format', 'github', dir]);
    expect(code).toBe(1);
    expect(out.slice(0, 2)).toEqual([
      expect.stringMatching(
        /^::error file=.*sessions\/fra1\/as4242420005\.yaml,line=5::\/spec\/listenPort: router fra1 has no free listen port/,
      ),
      expect.stringMatching(
        /^::error file=.*sessions\/fra1\/as64601\.yaml,line=11::\/spec\/listenPort: port 30500 on router fra1/,
      ),
    ]);
    // the file property names the file from the working directory, where CI steps run
    expect(out[1]).toMatch(/file=[^,]*sessions\/fra1\/as64601\.yaml,/);
  });

  it('writes one JSON document in --format json', async () => {
    const { code, out } = await capture(['--base', 'main', '--format', 'json', dir]);
    expect(code).toBe(1);
    const report = JSON.parse(out.join('\n')) as JsonReport;
    expect(report).toEqual({
      ok: false,
      base: 'main',
      problems: 2,
      counts: { routers: 2, sessions: 7, policies: 2 },
      files: [
        {
          file: 'sessions/fra1/as4242420005.yaml',
          changed: true,
          ok: false,
          problems: [
            { pointer: '/spec/listenPort', message: expect.stringMatching(/no free listen port/), line: 5 },
          ],
        },
        {
          file: 'sessions/fra1/as64601.yaml',
          changed: true,
          ok: false,
          problems: [
            {
              pointer: '/spec/listenPort',
              message: 'port 30500 on router fra1 is already used by session as64602-fra1',
              line: 11,
            },
          ],
        },
      ],
    });
  });
});

describe('pointerLine', () => {
  const text = `apiVersion: peerops.dev/v1alpha1
kind: Router
metadata:
  name: fra1
spec:
  # the router's own
  nodeId: 1
  loopback:
    ipv4: 172.20.0.1
    ipv6: fd00::1
  portRange: { min: 1, max: 2 }
  blockedAsns:
  - 1
  - 2
`;
  it('finds the key a pointer names, by indentation', () => {
    expect(pointerLine(text, '/kind')).toBe(2);
    expect(pointerLine(text, '/spec')).toBe(5);
    expect(pointerLine(text, '/spec/nodeId')).toBe(7);
    expect(pointerLine(text, '/spec/loopback/ipv6')).toBe(10);
    expect(pointerLine(text, '/spec/blockedAsns/1')).toBe(14);
    // a key in a flow mapping, or one that is not there: the deepest line found
    expect(pointerLine(text, '/spec/portRange/min')).toBe(11);
    expect(pointerLine(text, '/spec/uuid')).toBe(5);
    // name under metadata, not a deeper or later one
    expect(pointerLine(text, '/metadata/name')).toBe(4);
    expect(pointerLine(text, '/')).toBe(1);
    expect(pointerLine(undefined, '/spec')).toBe(1);
    expect(pointerLine('a: [\n\n', '/', 'not valid YAML: unexpected end of the stream (3:1)')).toBe(3);
  });
});
