/**
 * `peerops adopt --pull-request` (docs/gitops.md, "Adopted sessions by pull request") against a real
 * Gitea on loopback (test/support/gitea.ts): the real command plans a hand-made router's files, pushes
 * the manifests with the git program and opens the pull request, which the test reads back through
 * Gitea's API (branch, title, body, files and their `adopted` blocks), then merges one and watches a
 * real `peerops serve` following the repository take the sessions in. GitHub's and GitLab's calls
 * cannot run here (no server of theirs runs offline): a loopback HTTP server that answers their
 * documented pull-request endpoints checks what is sent and read instead.
 */
import { execFile } from 'node:child_process';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPullRequest } from '../../agent/adopt/forge.ts';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { routerFields } from '../api/helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { Gitea } from '../support/gitea.ts';
import { freePort } from '../support/ports.ts';

const run = promisify(execFile);
const KEY = (n: number) => Buffer.alloc(32, n).toString('base64');
const ASNS = [4242420101, 4242420102, 4242420103];
let root: string;
let gitea: Gitea;
let repoUrl: string;

async function put(path: string, text: string): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, text);
}

/** The real `peerops adopt` on the hand-made files; exit status, stdout and stderr. */
async function adopt(env: Record<string, string>, ...args: string[]) {
  const paths = [
    '--router=fra1',
    '--files-only',
    `--wireguard-dir=${join(root, 'wg')}`,
    `--networkd-dir=${join(root, 'networkd')}`,
    `--bird-conf=${join(root, 'bird/bird.conf')}`,
  ];
  try {
    const r = await run(process.execPath, ['bin/peerops.ts', 'adopt', ...paths, ...args], {
      env: { ...process.env, PEEROPS_GIT_REMOTE: '', PEEROPS_GIT_CREDENTIALS: '', ...env },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(async () => {
  gitea = new Gitea();
  await gitea.start();
  await gitea.api('POST', '/user/repos', { name: 'peering', auto_init: true, default_branch: 'main' });
  repoUrl = `${gitea.url}/${gitea.user}/peering.git`;
  root = await mkdtemp(join(tmpdir(), 'adopt-pr-'));
  // the DN42 wiki's layout: bird.conf includes peers/*, each peer a protocol from template dnpeers
  await put(
    join(root, 'bird/bird.conf'),
    `router id 172.20.0.1;\ntemplate bgp dnpeers {\n  local as 4242420000;\n  ipv4 { import all; export all; extended next hop on; };\n  ipv6 { import all; export all; };\n}\ninclude "${join(root, 'bird/peers/*')}";\n`,
  );
  for (const [i, asn] of ASNS.entries()) {
    await put(
      join(root, `wg/wg_${i + 1}.conf`),
      `[Interface]\nListenPort = ${31001 + i}\nPostUp = ip addr add fe80::1/64 dev %i\nTable = off\n\n[Peer]\nPublicKey = ${KEY(i + 1)}\nEndpoint = peer${i + 1}.example.net:2${i + 1}000\nAllowedIPs = 0.0.0.0/0, ::/0\n`,
    );
    await put(
      join(root, `bird/peers/as${asn}.conf`),
      `protocol bgp dn42_${i + 1} from dnpeers {\n  neighbor fe80::10${i + 1}%wg_${i + 1} as ${asn};\n}\n`,
    );
  }
  // a protocol on no tunnel: not adopted, and the pull request says why
  await put(
    join(root, 'bird/peers/gone.conf'),
    `protocol bgp gone from dnpeers {\n  neighbor fe80::30%wg_gone as 4242420130;\n}\n`,
  );
  await mkdir(join(root, 'networkd'));
  await put(join(root, 'token'), `${gitea.token}\n`);
  await chmod(join(root, 'token'), 0o600);
  // the third peer's session is in the repository already: the pull request leaves it as it is
  await gitea.api('POST', `/repos/${gitea.user}/peering/contents/sessions/fra1/as4242420103.yaml`, {
    branch: 'main',
    message: 'AS4242420103 on fra1',
    content: Buffer.from('# the network’s own\n').toString('base64'),
  });
}, 180_000);

afterAll(async () => {
  await gitea?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

describe('peerops adopt --pull-request on a real Gitea', () => {
  it('pushes the manifests on a branch and opens the pull request, read back through the API', async () => {
    const credentials = { PEEROPS_GIT_CREDENTIALS_FILE: join(root, 'token') };
    const started = Date.now();
    const r = await adopt(
      credentials,
      '--pull-request',
      '--forge=gitea',
      `--git-remote=${repoUrl}`,
      '--branch=adopt/fra1-test',
    );
    expect(r.stderr).toContain('pull request #1');
    expect(r.code).toBe(0);
    console.log(
      `adopt --pull-request (plan, clone, commit, push, open): ${Date.now() - started} ms, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    expect(r.stdout.trim().split('\n').at(-1)).toBe(`${gitea.url}/${gitea.user}/peering/pulls/1`);
    // the token is never printed, nor handed to git on its command line
    expect(r.stdout + r.stderr).not.toContain(gitea.token);

    const pull = await gitea.api<{
      title: string;
      body: string;
      head: { ref: string };
      base: { ref: string };
      state: string;
    }>('GET', `/repos/${gitea.user}/peering/pulls/1`);
    expect(pull).toMatchObject({
      title: 'Adopt 2 sessions of router fra1',
      head: { ref: 'adopt/fra1-test' },
      base: { ref: 'main' },
      state: 'open',
    });
    expect(pull.body).toContain('| 4242420101 | wg_1 | 31001 | fe80::101 |');
    expect(pull.body).toContain('| 4242420102 | wg_2 | 31002 | fe80::102 |');
    expect(pull.body).toContain('protocol gone: neighbor fe80::30 is on no tunnel this router has');
    expect(pull.body).toContain('`sessions/fra1/as4242420103.yaml`');

    const files = await gitea.api<{ filename: string; status: string }[]>(
      'GET',
      `/repos/${gitea.user}/peering/pulls/1/files`,
    );
    expect(files.map((f) => [f.filename, f.status])).toEqual([
      ['sessions/fra1/as4242420101.yaml', 'added'],
      ['sessions/fra1/as4242420102.yaml', 'added'],
    ]);
    const raw = await fetch(
      `${gitea.url}/api/v1/repos/${gitea.user}/peering/raw/sessions/fra1/as4242420101.yaml?ref=adopt/fra1-test`,
      { headers: { authorization: `token ${gitea.token}` } },
    );
    const manifest = load(await raw.text()) as { metadata: { name: string }; spec: Record<string, unknown> };
    expect(manifest.metadata.name).toBe('as4242420101-fra1');
    expect(manifest.spec).toMatchObject({
      asn: 4242420101,
      router: 'fra1',
      listenPort: 31001,
      publicKey: KEY(1),
      adopted: {
        interface: 'wg_1',
        protocols: ['dn42_1'],
        files: [join(root, 'wg/wg_1.conf'), join(root, 'bird/peers/as4242420101.conf')],
      },
    });

    // the same branch again: the forge holds it, the push is refused and nothing is opened
    const again = await adopt(
      credentials,
      '--pull-request',
      '--forge=gitea',
      `--git-remote=${repoUrl}`,
      '--branch=adopt/fra1-test',
    );
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('--pull-request: cannot push branch adopt/fra1-test');
    expect(await gitea.api<unknown[]>('GET', `/repos/${gitea.user}/peering/pulls?state=all`)).toHaveLength(1);
  }, 120_000);

  it('once merged on Gitea, a controller following the repository takes the sessions in, adopted and awaiting review', async () => {
    // a repository of its own: the first test's holds a file that is no manifest
    await gitea.api('POST', '/user/repos', { name: 'network', auto_init: true, default_branch: 'main' });
    const url = `${gitea.url}/${gitea.user}/network.git`;
    const data = join(root, 'data');
    await mkdir(data, { mode: 0o700 });
    const controller = new ControllerProcess(
      data,
      await freePort(),
      { PEEROPS_GIT_CREDENTIALS_FILE: join(root, 'token'), PEEROPS_GIT_INTERVAL: '1' },
      ['--git-remote', url],
    );
    try {
      await controller.start();
      const admin = (await TokenIssuer.fromExistingFile(defaultKeyPath(data))).issueToken(
        4242420000,
        'admin',
      ).token;
      // the router, pushed to Gitea before the write is answered (the sync push mode)
      const added = await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('fra1') });
      expect(added.status, JSON.stringify(added.body)).toBe(200);

      const r = await adopt(
        { PEEROPS_GIT_CREDENTIALS_FILE: join(root, 'token') },
        '--pull-request',
        '--forge=gitea',
        `--git-remote=${url}`,
      );
      expect(r.code, r.stderr).toBe(0);
      const number = Number(/pulls\/(\d+)$/.exec(r.stdout.trim())?.[1]);
      const merging = Date.now();
      // Gitea answers 405 "Please try again later" until it has checked the pull request can merge
      for (const deadline = Date.now() + 30_000; ;) {
        const refused = await gitea
          .api('POST', `/repos/${gitea.user}/network/pulls/${number}/merge`, { Do: 'merge' })
          .then(
            () => undefined,
            (err: Error) => err,
          );
        if (!refused) break;
        if (!refused.message.includes('HTTP 405') || Date.now() > deadline) throw refused;
        await new Promise((r) => setTimeout(r, 250));
      }
      const { merge_commit_sha: merged } = await gitea.api<{ merge_commit_sha: string }>(
        'GET',
        `/repos/${gitea.user}/network/pulls/${number}`,
      );

      type Listed = { asn: number; statusName: string; adopted: { by: string; interface: string } | null };
      let sessions: Listed[] = [];
      const deadline = Date.now() + 30_000;
      while (sessions.length < ASNS.length && Date.now() < deadline) {
        // the admin API allows 60 requests a minute
        await new Promise((res) => setTimeout(res, 1000));
        const list = await controller.post(admin, '/admin/session', { action: 'list' });
        expect(list.status, `${JSON.stringify(list.body)}\n${controller.output}`).toBe(200);
        sessions = list.body.sessions as Listed[];
      }
      console.log(
        `merge on Gitea → ${sessions.length} sessions in the controller: ${Date.now() - merging} ms (fetch every 1 s, polled every 1 s)`,
      );
      expect(
        sessions.map((s) => [s.asn, s.statusName, s.adopted?.interface, s.adopted?.by]).sort(),
        controller.output,
      ).toEqual(ASNS.map((asn, i) => [asn, 'PENDING_REVIEW', `wg_${i + 1}`, `merge ${merged.slice(0, 12)}`]));
    } finally {
      await controller.kill();
    }
  }, 120_000);

  it('proposes a plan file (printed with -o json, edited), judged as the store will before any push', async () => {
    const printed = await adopt({}, '-o', 'json');
    const plan = JSON.parse(printed.stdout) as { sessions: Record<string, unknown>[] };
    // the admin adds the peer's DN42 address the hand-made files do not name
    plan.sessions[0]!.ipv6 = 'fd42:4242:101::1';
    await put(join(root, 'plan.json'), JSON.stringify(plan));
    const credentials = { PEEROPS_GIT_CREDENTIALS_FILE: join(root, 'token') };
    const r = await adopt(
      credentials,
      `--plan=${join(root, 'plan.json')}`,
      '--pull-request',
      '--forge=gitea',
      `--git-remote=${repoUrl}`,
      '--branch=adopt/fra1-plan',
    );
    expect(r.code, r.stderr).toBe(0);
    const number = Number(/pulls\/(\d+)$/.exec(r.stdout.trim())?.[1]);
    const pull = await gitea.api<{ body: string; head: { ref: string } }>(
      'GET',
      `/repos/${gitea.user}/peering/pulls/${number}`,
    );
    expect(pull.head.ref).toBe('adopt/fra1-plan');
    expect(pull.body).toContain('| 4242420101 | wg_1 | 31001 | fe80::101 | fd42:4242:101::1 |');
    expect(pull.body).toContain('protocol gone: neighbor fe80::30 is on no tunnel this router has');

    // a field the schema does not name: refused naming it, and no branch is pushed
    plan.sessions[1]!.colour = 'blue';
    await put(join(root, 'plan.json'), JSON.stringify(plan));
    const bad = await adopt(
      credentials,
      `--plan=${join(root, 'plan.json')}`,
      '--pull-request',
      '--forge=gitea',
      `--git-remote=${repoUrl}`,
      '--branch=adopt/fra1-bad',
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      '--pull-request: session 1 (sessions/fra1/as4242420102.yaml): /spec/colour: is not a known field',
    );
    const branches = await gitea.api<{ name: string }[]>('GET', `/repos/${gitea.user}/peering/branches`);
    expect(branches.map((b) => b.name)).not.toContain('adopt/fra1-bad');
  }, 60_000);

  it('says what is wrong with a bad token, without showing it', async () => {
    await put(join(root, 'wrong'), 'x-access-token:0123456789abcdef0123456789abcdef01234567');
    const r = await adopt(
      { PEEROPS_GIT_CREDENTIALS_FILE: join(root, 'wrong') },
      '--pull-request',
      '--forge=gitea',
      `--git-remote=${repoUrl}`,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`--pull-request: cannot fetch branch main of ${repoUrl}`);
    expect(r.stdout + r.stderr).not.toContain('0123456789abcdef0123456789abcdef01234567');
  }, 60_000);

  it('refuses a missing or unsafe repository, forge or credentials, naming the option', async () => {
    const cases: [Record<string, string>, string[], string][] = [
      [{}, ['--pull-request'], '--git-remote: missing'],
      [{}, ['--pull-request', `--git-remote=${repoUrl}`, '--forge=gitea'], '--pull-request: no credentials'],
      [
        { PEEROPS_GIT_CREDENTIALS: 'tok' },
        ['--pull-request', `--git-remote=http://u:secret@127.0.0.1:1/o/r.git`, '--forge=gitea'],
        '--git-remote: put credentials in PEEROPS_GIT_CREDENTIALS_FILE',
      ],
      [
        { PEEROPS_GIT_CREDENTIALS: 'tok' },
        ['--pull-request', '--git-remote=http://forge.example.net/o/r.git', '--forge=gitea'],
        '--git-remote: credentials go over https:// only',
      ],
      [
        { PEEROPS_GIT_CREDENTIALS: 'tok' },
        ['--pull-request', '--git-remote=https://forge.example.net/o/r.git'],
        '--forge: missing',
      ],
      [
        { PEEROPS_GIT_CREDENTIALS: 'tok' },
        ['--pull-request', '--git-remote=https://forge.example.net/o/r.git', '--forge=bitbucket'],
        '--forge: must be one of github, gitea, forgejo, gitlab',
      ],
      [
        { PEEROPS_GIT_CREDENTIALS: 'tok' },
        ['--pull-request', `--git-remote=${repoUrl}`, '--forge=gitea', '--branch=main'],
        "--branch: 'main' is not a usable new branch name",
      ],
    ];
    for (const [env, args, message] of cases) {
      const r = await adopt(env, ...args);
      expect({ args, code: r.code, out: r.stdout + r.stderr }).toMatchObject({
        code: 2,
        out: expect.stringContaining(message),
      });
      expect(r.stdout + r.stderr).not.toContain('secret');
    }
  }, 60_000);
});

/**
 * A loopback server answering one pull-request endpoint as GitHub's or GitLab's REST API documents it,
 * recording what it was sent.
 */
async function forgeDouble(status: number, answer: object) {
  const seen: { method: string; url: string; headers: IncomingHttpHeaders; body: unknown }[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: JSON.parse(body),
      });
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise((r) => server.close(r)) };
}

describe('the pull-request calls of GitHub and GitLab (loopback doubles: their servers cannot run here)', () => {
  const pr = {
    title: 'Adopt 2 sessions of router fra1',
    body: 'the table',
    head: 'adopt/fra1-x',
    base: 'main',
  };

  it('GitHub (Enterprise Server path): POST /api/v3/repos/:owner/:repo/pulls with a bearer token', async () => {
    const gh = await forgeDouble(201, { number: 7, html_url: 'https://ghe.example/net/peering/pull/7' });
    try {
      const opened = await openPullRequest('github', `${gh.url}/net/peering.git`, 'ghp_tok', pr);
      expect(opened).toEqual({ number: 7, url: 'https://ghe.example/net/peering/pull/7' });
      expect(gh.seen).toMatchObject([
        {
          method: 'POST',
          url: '/api/v3/repos/net/peering/pulls',
          headers: { authorization: 'Bearer ghp_tok', accept: 'application/vnd.github+json' },
          body: pr,
        },
      ]);
    } finally {
      await gh.close();
    }
  });

  it('GitHub refusing (422): its message and errors, said', async () => {
    const gh = await forgeDouble(422, {
      message: 'Validation Failed',
      errors: [{ message: 'A pull request already exists for net:adopt/fra1-x.' }],
    });
    try {
      await expect(openPullRequest('github', `${gh.url}/net/peering`, 'ghp_tok', pr)).rejects.toThrow(
        'the forge refused the pull request: HTTP 422: Validation Failed; A pull request already exists for net:adopt/fra1-x.',
      );
    } finally {
      await gh.close();
    }
  });

  it('GitLab: POST /api/v4/projects/:path/merge_requests with PRIVATE-TOKEN, nested groups encoded', async () => {
    const gl = await forgeDouble(201, {
      iid: 3,
      web_url: 'https://gitlab.example/net/dn42/peering/-/merge_requests/3',
    });
    try {
      const opened = await openPullRequest('gitlab', `${gl.url}/net/dn42/peering.git`, 'glpat-tok', pr);
      expect(opened).toEqual({
        number: 3,
        url: 'https://gitlab.example/net/dn42/peering/-/merge_requests/3',
      });
      expect(gl.seen).toMatchObject([
        {
          url: '/api/v4/projects/net%2Fdn42%2Fpeering/merge_requests',
          headers: { 'private-token': 'glpat-tok' },
          body: { source_branch: pr.head, target_branch: 'main', title: pr.title, description: pr.body },
        },
      ]);
    } finally {
      await gl.close();
    }
  });
});
