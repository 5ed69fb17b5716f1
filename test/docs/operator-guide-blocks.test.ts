/**
 * Every shell block of the README's quick start and of docs/operator-guide.md, run word for word where
 * it is written for, in the order a new operator meets them:
 * - the operator's machine: a network and mount namespace of its own, so that the blocks' own words hold
 *   (`127.0.0.1:8080`, `/var/lib/peerops` on an overlay of /var/lib, `/srv/dn42-registry`), a temporary
 *   HOME, `npm install -g` of the tarball the release build packs (packNpm) into the working
 *   directory, with npm's global prefix in a temporary directory on PATH;
 * - a user's machine (the README's "Users" block): another HOME with an SSH key, the same installed
 *   `peerops`, reaching `https://peering.example.net` through a TLS reverse proxy (tls-proxy.ts, its
 *   certificate trusted with NODE_EXTRA_CA_CERTS, the name in the namespace's /etc/hosts);
 * - the router (docs/operator-guide.md section 5): run in the Debian 13 root with the release's APT
 *   repository by test/release/apt-repo.test.ts (routerBlocks there), listed here.
 * What this machine cannot have is replaced by the nearest real thing, and the test prints it: the DN42
 * registry is test/fixtures/dn42-registry with the user's aut-num, mntner (their SSH key) and route6
 * objects written into it in the registry's format; placeholders (`<key>`, `<uuid>`) by real values; the
 * files a reader writes themselves (`policy.json`) by minimal ones. Blocks marked
 * `<!-- doc-blocks: not run: … -->` are listed with their reason. A block whose last command is a
 * foreground `peerops serve` runs in a namespace of its own until the controller answers, then stops.
 */
import { execFile, spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_OWN_PREFIX_WARNING } from '../../common/rules/policy.ts';
import { packNpm } from '../../scripts/build-release.ts';
import { wgKey } from '../api/helpers.ts';
import { writeRegistry } from '../login/support.ts';
import { blockName, NEW_ROUTER_SECTION, shellBlocks, where, type ShellBlock } from './shell-blocks.ts';

const run = promisify(execFile);
const REPO = path.join(import.meta.dirname, '..', '..');
const README = 'README.md';
const GUIDE = 'docs/operator-guide.md';
const USER_ASN = 4242421234;
/** A second peer network, for the review block's second session. */
const OTHER_ASN = 4242422345;

let work: string;
/** What each block became, printed at the end: `ran`, `skipped: why`, `router: …`. */
const report: string[] = [];
/** What stands in for what this machine cannot have, and why: printed before the blocks. */
const STANDS_IN = [
  '/srv/dn42-registry: a clone of the DN42 registry needs the internet and an account in it; ' +
    `test/fixtures/dn42-registry with AS${USER_ASN}'s aut-num, mntner (the user's SSH key) and route6 written in`,
  'https://peering.example.net: no public name or certificate here; a TLS reverse proxy (tls-proxy.ts) on ' +
    "the namespace's 127.0.0.1:443, the name in its /etc/hosts, the certificate in NODE_EXTRA_CA_CERTS",
  "npm install -g: not into this machine's /usr; npm's global prefix is a temporary directory, on PATH",
];
/** Each placeholder and what a run put in its place. */
const replaced = new Set<string>();

/** The environment of the blocks: a clean one, not the test runner's (npx sets npm's variables). */
function baseEnv(home: string): Record<string, string> {
  const machinePath = (process.env.PATH ?? '')
    .split(':')
    .filter((dir) => dir && !dir.includes('node_modules'))
    .join(':');
  return {
    PATH: `${path.join(work, 'npm-global', 'bin')}:${machinePath}`,
    HOME: home,
    LANG: 'C.UTF-8',
    // `npm install -g` into a prefix of the test's, as an operator's npm configured to a prefix of theirs
    npm_config_prefix: path.join(work, 'npm-global'),
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  };
}

/** A step of a run: one of the doc's blocks, or a line of the test's own (printed as such). */
interface Step {
  block?: ShellBlock;
  /** Test setup, said as what it stands for. */
  setup?: string;
  script: string;
  /** Who runs it: the operator's shell (exports carry on), or the user's, a shell of its own. */
  as: 'operator' | 'user';
}

/** Each placeholder of the docs, and the real value a run puts in its place, in order of occurrence. */
function placeholders(values: Record<string, string[]>, block: ShellBlock): string {
  const next = new Map<string, number>();
  return block.script.replace(/<[a-z][a-z -]*>/g, (name) => {
    const list = values[name];
    if (!list)
      throw new Error(`${blockName(block)}: no value for the placeholder ${name}: add it to the test`);
    const i = next.get(name) ?? 0;
    next.set(name, i + 1);
    const value = list[Math.min(i, list.length - 1)] ?? '';
    replaced.add(`${name} → ${value}`);
    return value;
  });
}

/**
 * Runs the steps in one namespace (network, mount, pid: everything it started ends with it) and
 * returns the output; rejects naming the step that failed.
 */
async function runInNamespace(label: string, steps: Step[], extraPrelude: string[] = []): Promise<string> {
  const dir = path.join(work, label);
  await mkdir(path.join(dir, 'steps'), { recursive: true });
  const userEnv = Object.entries({
    ...baseEnv(path.join(work, 'user-home')),
    NODE_EXTRA_CA_CERTS: path.join(work, 'tls', 'cert.pem'),
  })
    .map(([k, v]) => `${k}='${v}'`)
    .join(' ');
  const main: string[] = [
    'set -e',
    // the namespace: loopback up; /var/lib writable over the machine's; /srv and /etc/hosts the test's
    'ip link set lo up',
    `mkdir -p ${dir}/varlib-upper ${dir}/varlib-work`,
    `mount -t overlay overlay -o lowerdir=/var/lib,upperdir=${dir}/varlib-upper,workdir=${dir}/varlib-work /var/lib`,
    `mount --bind ${work}/srv /srv`,
    `mount --bind ${work}/hosts /etc/hosts`,
    ...extraPrelude,
    `cd ${work}/cwd`,
  ];
  for (const [i, step] of steps.entries()) {
    const file = path.join(dir, 'steps', `${i}.sh`);
    await writeFile(file, step.script);
    const name = step.block ? blockName(step.block) : `setup: ${step.setup}`;
    main.push(`echo '::step ${i}: ${name.replaceAll("'", '')}'`);
    main.push(step.as === 'operator' ? `. ${file}` : `env -i ${userEnv} bash -e ${file}`);
  }
  main.push("echo '::done'");
  await writeFile(path.join(dir, 'main.sh'), `${main.join('\n')}\n`);
  // background processes keep the output open until the namespace ends: a file, not a pipe
  const log = await open(path.join(dir, 'out.log'), 'w');
  const started = performance.now();
  const code = await new Promise<number | null>((done) => {
    const child = spawn(
      'unshare',
      ['--net', '--mount', '--pid', '--fork', '--mount-proc', 'bash', '-e', path.join(dir, 'main.sh')],
      { env: baseEnv(path.join(work, 'home')), stdio: ['ignore', log.fd, log.fd] },
    );
    child.once('exit', done);
  });
  await log.close();
  const out = await readFile(path.join(dir, 'out.log'), 'utf8');
  console.log(`${label}: ${steps.length} steps, ${((performance.now() - started) / 1000).toFixed(1)} s`);
  if (code !== 0 || !out.includes('::done')) {
    const failed = [...out.matchAll(/^::step \d+: (.*)$/gm)].at(-1)?.[1] ?? 'the namespace set-up';
    throw new Error(`${label}: ${failed} failed (exit ${code}):\n${out.slice(-4000)}`);
  }
  return out;
}

/** The output of one step of a run. */
function stepOutput(out: string, block: ShellBlock): string {
  const start = out.indexOf(`: ${blockName(block).replaceAll("'", '')}\n`);
  const end = out.indexOf('\n::', start + 1);
  return out.slice(start, end < 0 ? undefined : end);
}

let readme: ShellBlock[];
let guide: ShellBlock[];
let routerKey: string;

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'peerops-doc-blocks-'));
  readme = await shellBlocks(REPO, README);
  guide = await shellBlocks(REPO, GUIDE);
  routerKey = wgKey();
  await Promise.all(
    ['cwd', 'home', 'user-home/.ssh', 'srv', 'tls'].map((d) =>
      mkdir(path.join(work, d), { recursive: true }),
    ),
  );
  // the release's package, where the quick start's `npm install -g ./peerops-0.1.0.tgz` finds it
  const t0 = performance.now();
  // (staged, not `npm pack` in the checkout: its prepack rewrites dist/ under other tests' packs)
  const version = (JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as { version: string })
    .version;
  await packNpm(version, path.join(work, 'cwd'));
  console.log(`the package, as npm pack makes it: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  // the user's key, and the DN42 registry: the fixture, with the user's objects in its format
  await run('ssh-keygen', [
    '-q',
    '-t',
    'ed25519',
    '-N',
    '',
    '-C',
    'user@peer',
    '-f',
    path.join(work, 'user-home/.ssh/id_ed25519'),
  ]);
  const userKey = (await readFile(path.join(work, 'user-home/.ssh/id_ed25519.pub'), 'utf8'))
    .trim()
    .split(' ');
  const registry = path.join(work, 'srv', 'dn42-registry');
  await cp(path.join(REPO, 'test/fixtures/dn42-registry'), registry, { recursive: true });
  await writeRegistry(registry, {
    autNums: { [USER_ASN]: ['USER-MNT'], [OTHER_ASN]: ['OTHER-MNT'] },
    mntners: { 'USER-MNT': [`${userKey[0]} ${userKey[1]}`], 'OTHER-MNT': [] },
    routes: { 'fd42:1234::/48': [USER_ASN], 'fd42:2345::/48': [OTHER_ASN] },
  });
  // peering.example.net: this namespace's loopback, behind the proxy's certificate
  await writeFile(path.join(work, 'hosts'), '127.0.0.1 localhost peering.example.net\n::1 localhost\n');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=peering.example.net',
    '-addext',
    'subjectAltName=DNS:peering.example.net',
    '-keyout',
    path.join(work, 'tls', 'key.pem'),
    '-out',
    path.join(work, 'tls', 'cert.pem'),
  ]);
}, 120_000);

afterAll(async () => {
  const section = (title: string, lines: Iterable<string>) => `${title}:\n  ${[...lines].join('\n  ')}`;
  console.log(
    [section('stands in', STANDS_IN), section('placeholders', replaced), section('doc blocks', report)].join(
      '\n',
    ),
  );
  if (work) await rm(work, { recursive: true, force: true });
});

/** The blocks of `blocks` not marked, each said in the report; the marked ones reported as skipped. */
function runnable(blocks: ShellBlock[]): ShellBlock[] {
  return blocks.filter((b) => {
    if (b.notRun) report.push(`skipped ${blockName(b)}: ${b.notRun}`);
    else if (where(b) === 'router' && b.heading.startsWith(NEW_ROUTER_SECTION))
      report.push(`router  ${blockName(b)}: run by test/release/apt-repo.test.ts in a Debian 13 root`);
    else if (where(b) === 'router')
      report.push(`skipped ${blockName(b)}: a router with hand-made peers (test/agent/adopt/ runs adopt)`);
    return !b.notRun && where(b) !== 'router';
  });
}

describe("the README's quick start, word for word", () => {
  it("the operators' block brings up a controller, an admin context, the policy, a router; the users' block logs in and creates a session", async () => {
    const blocks = runnable(readme);
    const operators = blocks.find((b) => b.heading === '## Quick start' && where(b) === 'operator');
    const users = blocks.find((b) => b.heading === '## Quick start' && where(b) === 'user');
    expect(operators, "the operators' block").toBeDefined();
    expect(users, "the users' block").toBeDefined();
    expect(blocks.filter((b) => b.heading === '## Quick start')).toHaveLength(2);
    const values = { '<key>': [routerKey], '<your wg public key>': [wgKey()] };
    const steps: Step[] = [operators, users].map((block) => ({
      block,
      script: placeholders(values, block as ShellBlock),
      as: where(block as ShellBlock) === 'user' ? 'user' : 'operator',
    }));
    const out = await runInNamespace('readme', steps, [
      `${process.execPath} ${path.join(REPO, 'test/docs/tls-proxy.ts')} ${work}/tls/key.pem ${work}/tls/cert.pem &`,
    ]);
    for (const block of [operators, users] as ShellBlock[]) report.push(`ran     ${blockName(block)}`);
    const op = stepOutput(out, operators as ShellBlock);
    // the block's own npm install -g put `peerops` into the prefix first on PATH
    expect(op).toMatch(/^added 1 package/m);
    expect(op).toContain('policy default saved');
    expect(op).toContain('router fra1 added');
    // the block names the network's prefixes: no warning after its policy step
    expect(op.slice(op.indexOf('policy default saved'))).not.toContain(NO_OWN_PREFIX_WARNING);
    const user = stepOutput(out, users as ShellBlock);
    expect(user).toMatch(/logged in/i);
    expect(user).toMatch(/fd42:1234::1/);
  }, 120_000);
});

/** A foreground `peerops serve` as a block's last command: the block serves until stopped. */
const servesInForeground = (block: ShellBlock) =>
  /^peerops serve\b[^&]*$/.test(block.script.trim().split('\n').at(-1) ?? '');

describe('docs/operator-guide.md, word for word', () => {
  it("the operator's path: install, first token, policy, router, reviews, validate; a foreground serve answers", async () => {
    const blocks = runnable(guide);
    const foreground = blocks.filter(servesInForeground);
    const sequence = blocks.filter((b) => !servesInForeground(b));
    const created = (asn: number, n: string) =>
      `$(PEEROPS_TOKEN=$(peerops admin token --data /var/lib/peerops --asn ${asn} 2>/dev/null) ` +
      `peerops session create --router fra1 --ipv6 fd42:${n}::1 --link-local fe80::${n} --public-key ${wgKey()} ` +
      `--endpoint peer${n}.example.org:51820 -o json | node -pe 'JSON.parse(require("fs").readFileSync(0, "utf8")).uuid')`;
    /** What a reader has at hand before a block, and the test writes: by the block's first words. */
    const before: [string, string, string][] = [
      [
        'peerops admin policy set --dn42-asn',
        "the reader's own policy.json",
        `echo '{"dn42Asn": 4242420000, "ownPrefixes": {"ipv4": ["172.20.0.0/27"], "ipv6": ["fd42:4242::/48"]}}' > policy.json`,
      ],
      [
        'peerops admin policy set --router fra1',
        "the reader's own fra1-override.json",
        `echo '{"importLimit": {"ipv4": 1000, "ipv6": 1000, "action": "block"}}' > fra1-override.json`,
      ],
      [
        'peerops admin session list --status 3',
        `two peer networks' sessions waiting for review (AS${USER_ASN}, AS${OTHER_ASN})`,
        `PENDING_1=${created(USER_ASN, '1234')}\nPENDING_2=${created(OTHER_ASN, '2345')}`,
      ],
      [
        'peerops validate .',
        "a checkout of the network's GitOps repository (examples/gitops-repo)",
        `cp -r ${path.join(REPO, 'examples/gitops-repo')} gitops-checkout && cd gitops-checkout`,
      ],
    ];
    const values = {
      '<wg public key of its session tunnels>': [routerKey],
      // approve the first, reject the second, disable and enable the first
      '<uuid>': ['"$PENDING_1"', '"$PENDING_2"', '"$PENDING_1"', '"$PENDING_1"'],
    };
    const steps: Step[] = [];
    for (const block of sequence) {
      const setup = before.find(([words]) => block.script.startsWith(words));
      if (setup) steps.push({ setup: setup[1], script: `${setup[2]}\n`, as: 'operator' });
      steps.push({ block, script: placeholders(values, block), as: 'operator' });
    }
    expect(steps.filter((s) => s.setup)).toHaveLength(before.length);
    const out = await runInNamespace('guide', steps);
    for (const step of steps)
      report.push(step.block ? `ran     ${blockName(step.block)}` : `setup   ${step.setup}`);
    const text = (words: string) => {
      const block = sequence.find((b) => b.script.includes(words));
      if (!block) throw new Error(`docs/operator-guide.md has no block with '${words}'`);
      return stepOutput(out, block);
    };
    expect(text('peerops admin token --data')).toContain('token saved to');
    expect(text('peerops admin router add fra1')).toContain('router fra1 added');
    // approve, reject, disable, enable: each answered with the session's new status
    const reviews = text('peerops admin session approve')
      .split('\n')
      .filter((line) => line.startsWith('session '))
      .map((line) => line.replace(/^session [0-9a-f-]{36}: /, ''));
    expect(reviews).toEqual(['QUEUED_FOR_SETUP', 'REJECTED', 'DISABLED', 'QUEUED_FOR_SETUP']);
    expect(text('peerops validate .')).toContain('peerops validate: ok');

    // each foreground serve in a namespace of its own, until it answers; then its process group stopped
    expect(foreground).toHaveLength(1);
    for (const block of foreground) {
      await writeFile(path.join(work, 'foreground.sh'), block.script);
      const served = await runInNamespace(`serve-${block.line}`, [
        {
          setup: 'the block in the background, stopped once it answers',
          script: [
            'set -m',
            `bash -e ${path.join(work, 'foreground.sh')} &`,
            'curl -fsS --retry 30 --retry-connrefused --retry-delay 1 http://127.0.0.1:8080/livez',
            'kill -TERM -- -$!',
            'wait $! || true',
          ].join('\n'),
          as: 'operator',
        },
      ]).catch((err: Error) => {
        throw new Error(`${blockName(block)}: ${err.message}`);
      });
      expect(served).toContain('"status":"ok"');
      report.push(`ran     ${blockName(block)}: in a namespace of its own, until /livez answered`);
    }
  }, 180_000);
});
