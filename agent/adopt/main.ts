/**
 * `peerops adopt` (docs/agent.md, Adopting a running router): reads the router's hand-made WireGuard and
 * BIRD files and prints the adoption plan; read-only unless `--out`, `--pull-request` or `--apply` is
 * given. `--pull-request` proposes the plan's manifests on the GitOps repository's forge
 * (pull-request.ts); `--apply` sends the plan's sessions to the controller (POST /admin/adoptions),
 * which marks them adopted.
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { CORE_SCHEMA, dump, load } from 'js-yaml';
import { usageError } from '../../common/usage.ts';
import { gitBranch, gitRemote, isUsableBranch } from '../../common/git-remote.ts';
import { redactUrls } from '../../common/redact.ts';
import { FORGES, forgeOfHost, isForge } from './forge.ts';
import { sessionManifest } from './manifests.ts';
import { defaultBranch, proposeAdoption, type ProposedPlan, type PullRequestTarget } from './pull-request.ts';
import { planAdoption, type Plan, type PlannedSession } from './plan.ts';
import { readBird, readNetworkd, readWgQuick } from './read-files.ts';
import { mergeLive, readLiveTunnels } from './read-live.ts';
import { runningAgent, undoAdoption } from './undo.ts';
import { AgentConfigError, loadConfig } from '../config.ts';
import type { ClientOptions } from '../../cli/client.ts';

const HELP = `usage: peerops adopt --router NAME [options]
       peerops adopt --router NAME --pull-request --git-remote URL [--forge KIND] [--branch NAME]
       peerops adopt --plan FILE --apply [--url URL] [--token TOKEN]
       peerops adopt --plan FILE --pull-request --git-remote URL [--forge KIND]
       peerops adopt --undo [--config FILE]

Reads the router's WireGuard and BIRD files and prints one session per peer, and what it cannot adopt.
  --router NAME          this router's name in peerops (required)
  --wireguard-dir DIR    wg-quick files (default /etc/wireguard)
  --networkd-dir DIR     systemd-networkd files (default /etc/systemd/network)
  --bird-conf FILE       BIRD's main file; its includes are followed (default /etc/bird/bird.conf)
  --files-only           read the files only, not the live links and 'wg show all dump'
  --port-min N, --port-max N   the router's port range (default 30000-32767)
  -o table|yaml|json     output (default table)
  --out DIR              write a session manifest per adopted peer under DIR (sessions/<router>/as<asn>.yaml)
  --pull-request         push those manifests on a new branch of the network's GitOps repository and open
                         a pull request there (docs/gitops.md, Adopted sessions by pull request); the
                         credentials: PEEROPS_GIT_CREDENTIALS_FILE (or PEEROPS_GIT_CREDENTIALS), user:token
  --forge KIND           github, gitea, forgejo or gitlab (default: from the host, github.com or gitlab.com)
  --git-remote URL       the repository's HTTPS URL (default PEEROPS_GIT_REMOTE)
  --git-branch NAME      the branch the pull request merges into (default PEEROPS_GIT_BRANCH, else main)
  --branch NAME          the new branch (default adopt/<router>-<UTC date and time>)
  --apply                send the plan's sessions to the controller with an admin token: they arrive
                         awaiting review (docs/api.md, Adoptions); exit 1 if it refuses any
  --plan FILE            apply or propose this plan (what -o json|yaml printed, reviewed or edited)
                         instead of reading the router
  --url URL, --token TOKEN, --context NAME
                         the controller and admin token for --apply (default: PEEROPS_URL, PEEROPS_TOKEN,
                         the CLI's current context, as every peerops command)
  --undo                 put back every hand-made file the agent's takeover set aside, remove the agent's
                         files for those sessions and configure BIRD once (stop the agent first)
  --config FILE          the agent's config, for --undo (default /etc/peerops/agent.json)`;

function table(plan: Plan): string {
  const head = [
    'ASN',
    'INTERFACE',
    'PORT',
    'LINK-LOCAL',
    'IPV4',
    'ENDPOINT',
    'MTU',
    'MPBGP',
    'ENH',
    'PROTOCOLS',
  ];
  const rows = plan.sessions.map((s) => [
    String(s.asn),
    s.adopted.interface,
    String(s.listenPort),
    s.linkLocal ?? s.ipv6 ?? '-',
    s.ipv4 ?? '-',
    s.endpoint ?? '-',
    String(s.mtu ?? '-'),
    s.mpbgp ? 'yes' : 'no',
    s.extendedNextHop ? 'yes' : 'no',
    s.adopted.protocols.join(','),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  const out = [line(head), ...rows.map(line), '', `${plan.sessions.length} sessions to adopt`];
  if (plan.notAdopted.length)
    out.push('', `not adopted (${plan.notAdopted.length}):`, ...plan.notAdopted.map((n) => `  ${n.text}`));
  return out.join('\n');
}

export async function main(argv: string[]): Promise<number> {
  let flags;
  try {
    flags = parseArgs({
      args: argv,
      options: {
        router: { type: 'string' },
        'wireguard-dir': { type: 'string', default: '/etc/wireguard' },
        'networkd-dir': { type: 'string', default: '/etc/systemd/network' },
        'bird-conf': { type: 'string', default: '/etc/bird/bird.conf' },
        'port-min': { type: 'string' },
        'port-max': { type: 'string' },
        output: { type: 'string', short: 'o', default: 'table' },
        out: { type: 'string' },
        'pull-request': { type: 'boolean' },
        forge: { type: 'string' },
        'git-remote': { type: 'string' },
        'git-branch': { type: 'string' },
        branch: { type: 'string' },
        'files-only': { type: 'boolean' },
        apply: { type: 'boolean' },
        plan: { type: 'string' },
        url: { type: 'string' },
        token: { type: 'string' },
        context: { type: 'string' },
        undo: { type: 'boolean' },
        config: { type: 'string', default: '/etc/peerops/agent.json' },
        help: { type: 'boolean', short: 'h' },
      },
    }).values;
  } catch (err) {
    return usageError((err as Error).message);
  }
  if (flags.help) {
    console.log(HELP);
    return 0;
  }
  if (flags.undo) return undo(flags.config);
  const target = { url: flags.url, token: flags.token, context: flags.context };
  if (flags.plan !== undefined) {
    if (!flags.apply && !flags['pull-request'])
      return usageError('--plan: only with --apply or --pull-request');
    const plan = await readPlan(flags.plan);
    if (typeof plan === 'string') return usageError(plan);
    if (flags['pull-request']) {
      const routers = [...new Set(plan.sessions.map((s) => String(s.router)))];
      const router = routers[0];
      if (router === undefined || routers.length > 1 || (flags.router && flags.router !== router))
        return usageError(
          `--plan: its sessions name router(s) ${routers.join(', ') || 'none'}; a pull request proposes one router's`,
        );
      const checked = pullRequestTarget(router, flags, process.env);
      if (typeof checked === 'string') return usageError(checked);
      const code = await propose(router, plan, checked);
      if (code !== 0 || !flags.apply) return code;
    }
    return apply(plan, target);
  }
  if (!flags.router) return usageError('--router: missing; give this router’s name in peerops');
  if (!['table', 'yaml', 'json'].includes(flags.output)) return usageError('-o: must be table, yaml or json');
  let forge: PullRequestTarget | undefined;
  if (flags['pull-request']) {
    const checked = pullRequestTarget(flags.router, flags, process.env);
    if (typeof checked === 'string') return usageError(checked);
    forge = checked;
  }
  const min = Number(flags['port-min'] ?? 30000);
  const max = Number(flags['port-max'] ?? 32767);
  if (!Number.isInteger(min) || !Number.isInteger(max) || min < 1 || max > 65535 || min > max)
    return usageError('--port-min/--port-max: must be ports 1-65535 with min <= max');
  const files = [
    ...(await readWgQuick(flags['wireguard-dir'])),
    ...(await readNetworkd(flags['networkd-dir'])),
  ];
  const tunnels = flags['files-only'] ? files : mergeLive(files, await readLiveTunnels());
  const plan = planAdoption(tunnels, await readBird(flags['bird-conf']), {
    router: flags.router,
    portRange: { min, max },
  });
  if (flags.output === 'json') console.log(JSON.stringify(plan, null, 2));
  else if (flags.output === 'yaml') console.log(dump(plan));
  else console.log(table(plan));
  if (flags.out) {
    for (const { path, text } of plan.sessions.map(sessionManifest)) {
      const file = join(flags.out, path);
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, text);
    }
  }
  if (forge) {
    const code = await propose(flags.router, plan, forge);
    if (code !== 0 || !flags.apply) return code;
  }
  if (flags.apply) return apply(plan, target);
  return 0;
}

/** The pull request's repository, branches and credentials from the flags and environment; a string says why not. */
function pullRequestTarget(
  router: string,
  flags: { forge?: string; 'git-remote'?: string; 'git-branch'?: string; branch?: string },
  env: NodeJS.ProcessEnv,
): PullRequestTarget | string {
  const url = flags['git-remote'] ?? (env.PEEROPS_GIT_REMOTE || undefined);
  if (url === undefined)
    return '--git-remote: missing; give the GitOps repository’s HTTPS URL (or set PEEROPS_GIT_REMOTE)';
  try {
    const remote = gitRemote(url, env);
    if (!remote.credentials)
      return '--pull-request: no credentials; put user:token in a file only you can read and name it in PEEROPS_GIT_CREDENTIALS_FILE';
    const forge = flags.forge ?? forgeOfHost(url);
    if (forge === undefined)
      return `--forge: missing; the host ${new URL(url).host} does not say which forge it is (${FORGES.join(', ')})`;
    if (!isForge(forge)) return `--forge: must be one of ${FORGES.join(', ')}`;
    const base = gitBranch(flags['git-branch'], env);
    const branch = flags.branch ?? defaultBranch(router);
    if (!isUsableBranch(branch) || branch === base)
      return `--branch: '${branch}' is not a usable new branch name`;
    return { forge, url, credentials: remote.credentials, base, branch };
  } catch (err) {
    return (err as Error).message;
  }
}

/** The plan's manifests as a pull request; one line per file and the pull request's address. */
async function propose(router: string, plan: ProposedPlan, target: PullRequestTarget): Promise<number> {
  if (plan.sessions.length === 0) {
    console.error('--pull-request: the plan has no session to adopt');
    return 1;
  }
  try {
    const r = await proposeAdoption(router, plan, target);
    for (const path of r.added) console.error(`added ${path}`);
    for (const path of r.present) console.error(`left ${path}: the repository holds it already`);
    console.error(`pushed branch ${target.branch}; pull request #${r.pull.number}: ${r.pull.url}`);
    console.log(r.pull.url);
    return 0;
  } catch (err) {
    console.error(`--pull-request: ${redactUrls((err as Error).message)}`);
    return 1;
  }
}

/** A plan's file is at most what the controller takes in one request (docs/api.md, Adoptions). */
const PLAN_FILE_LIMIT = 1024 * 1024;

/**
 * The sessions of a plan file (-o json or yaml, maybe edited) and the sentences of what it leaves; a
 * string says why it cannot be used.
 */
async function readPlan(file: string): Promise<ProposedPlan | string> {
  let text: string;
  try {
    if ((await stat(file)).size > PLAN_FILE_LIMIT) return `--plan: ${file} is larger than 1 MiB`;
    text = await readFile(file, 'utf8');
  } catch (err) {
    return `--plan: ${(err as Error).message}`;
  }
  let doc: unknown;
  try {
    doc = load(text, { schema: CORE_SCHEMA });
  } catch (err) {
    return `--plan: ${file} is not JSON or YAML: ${(err as Error).message.split('\n')[0]}`;
  }
  const sessions = (doc as { sessions?: unknown } | null)?.sessions;
  if (!Array.isArray(sessions)) return `--plan: ${file} has no sessions list (the output of -o json or yaml)`;
  // each session's fields are the controller's (or, for a pull request, the store's) to judge: it
  // names the field and the reason
  const left = (doc as { notAdopted?: unknown }).notAdopted;
  const notAdopted = (Array.isArray(left) ? (left as { text?: unknown }[]) : [])
    .map((n) => n?.text)
    .filter((text): text is string => typeof text === 'string')
    .map((text) => ({ text: text.slice(0, 1024) }));
  return { sessions: sessions as PlannedSession[], notAdopted };
}

interface AdoptionOutcome {
  index: number;
  asn: number;
  interface: string;
  outcome: 'created' | 'unchanged' | 'refused';
  statusName?: string;
  message?: string;
}

/** The plan's sessions to the controller; one line per session with what became of it. */
async function apply(plan: Pick<Plan, 'sessions'>, opts: ClientOptions): Promise<number> {
  if (plan.sessions.length === 0) {
    console.error('--apply: the plan has no session to adopt');
    return 1;
  }
  // the CLI's client only here: the agent's own runs never load it (docs/agent.md, the agent's memory)
  const { Client, CliError } = await import('../../cli/client.ts');
  let answer: { created: number; unchanged: number; refused: number; sessions: AdoptionOutcome[] };
  try {
    const client = await Client.create(opts);
    answer = await client.post('/admin/adoptions', { sessions: plan.sessions });
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    console.error(`${err.code}: ${err.message}`);
    return err.exitStatus;
  }
  for (const s of answer.sessions) {
    const what = `AS${s.asn} ${s.interface}`;
    const status = s.statusName ? ` (${s.statusName})` : '';
    const why = s.message ? `: ${s.message}` : '';
    console.error(`${s.outcome} ${what}${status}${why}`);
  }
  console.error(
    `${answer.created} adopted, ${answer.unchanged} already adopted, ${answer.refused} refused; ` +
      'review and approve them in the portal (Reviews) or with peerops admin',
  );
  return answer.refused > 0 ? 1 : 0;
}

async function undo(configFile: string): Promise<number> {
  let config;
  try {
    config = await loadConfig(configFile);
  } catch (err) {
    if (err instanceof AgentConfigError) return usageError(err.message);
    throw err;
  }
  const running = await runningAgent(config);
  if (running) {
    console.error(
      `the agent answers on ${running}: stop it first (systemctl stop peerops-agent), or its next pass takes the sessions over again`,
    );
    return 1;
  }
  const r = await undoAdoption(config);
  for (const f of r.restored) console.log(`put back ${f}`);
  for (const f of r.removed) console.log(`removed ${f}`);
  console.log(`BIRD: ${r.bird}`);
  if (!r.ok) {
    console.error(
      'BIRD refused the hand-made configuration: the files are back, fix them and run birdc configure',
    );
    return 1;
  }
  console.log(
    `${r.restored.length} hand-made files back; enable what starts them at boot again (docs/agent.md)`,
  );
  return 0;
}
