/**
 * Controller configuration from command-line flags and the environment (flags win). One place, so
 * `peerops serve`, tests and the lab all build the same Config.
 */
import { resolve } from 'node:path';
import ipaddr from 'ipaddr.js';
import { DEFAULT_IDLE_SECONDS } from './auth/portal-session.ts';
import { gitBranch, gitRemote, secret } from '../common/git-remote.ts';

export interface Config {
  /** Address to listen on: `host` ('' = every address) and `port`. */
  listen: { host: string; port: number };
  /**
   * fastify's `trustProxy` (`--trust-proxy`, `PEEROPS_TRUST_PROXY`; docs/operator-guide.md, Behind a
   * reverse proxy): the proxies whose X-Forwarded-For names the client, as addresses, CIDRs or
   * proxy-addr's names (loopback, linklocal, uniquelocal), or true for any sender. Default false.
   */
  trustProxy: boolean | string[];
  /** Holds the git store (`store.git`) and the JWT signing key. */
  dataDir: string;
  store: 'git' | 'kubernetes';
  /** PEM file of the Ed25519 JWT key (several replicas share it); default `<dataDir>/jwt-ed25519.pem`. */
  jwtKeyFile: string | undefined;
  /** `AGENT_AUTOUPDATE=false` turns agent auto-update off fleet-wide. */
  agentAutoUpdate: boolean;
  /** Shared rate-limit counters for several replicas. */
  redisUrl: string | undefined;
  /** Prometheus whose scrapes of every replica the history API reads (docs/kubernetes.md, Session history). */
  historyPrometheus: string | undefined;
  rateLimit: { perMinute: number; agentPerMinute: number };
  /** Login plugin wiring (docs/login.md). */
  registry: string | undefined;
  /**
   * `PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY=true`: a router's autoApprove takes effect even where no DN42
   * registry's route objects check that a session's addresses are the peer's (docs/operator-guide.md, 4).
   */
  autoApproveWithoutRegistry: boolean;
  adminAsns: number[];
  serviceHost: string | undefined;
  /** Lifetime of the JWTs that login issues, seconds (`PEEROPS_TOKEN_TTL`, default 12 h). */
  tokenTtlSeconds: number;
  /** The portal's sign-in ends after this long unused, seconds (`PEEROPS_PORTAL_IDLE_TIMEOUT`, default 30 min). */
  portalIdleSeconds: number;
  /** Status 4 for longer than this is "stuck" (docs/operator-guide.md, Monitoring). */
  stuckAfterSeconds: number;
  /** No heartbeat for longer than this is "offline" (docs/operator-guide.md, Monitoring). */
  offlineAfterSeconds: number;
  bodyLimitBytes: number;
  /** Upper bound of `?wait=` on the agent's long poll. */
  maxLongPollSeconds: number;
  /** pino level of the controller's log (`PEEROPS_LOG_LEVEL`, default info). */
  logLevel: LogLevel;
  /**
   * The HTTPS admission webhook (Kubernetes store only): `PEEROPS_WEBHOOK_LISTEN` and
   * `PEEROPS_WEBHOOK_CERT_DIR` (holding `tls.crt` and `tls.key`, as a kubernetes.io/tls Secret mounts).
   */
  webhook: { listen: { host: string; port: number }; certDir: string } | undefined;
  /** The git store's branch and the forge it follows (docs/gitops.md, "Following a forge"). */
  git: GitConfig;
}

export interface GitConfig {
  /** The branch holding the spec files (`--git-branch`, `PEEROPS_GIT_BRANCH`, default main). */
  branch: string;
  remote:
    | {
        url: string;
        intervalMs: number;
        credentials?: { username: string; password: string };
        /**
         * `sync` (default): a user's or admin's write is answered once the forge holds it; `async`: once
         * committed locally (`--git-push-mode`, `PEEROPS_GIT_PUSH_MODE`; docs/gitops.md, "Push modes").
         */
        pushMode: 'sync' | 'async';
        /** How long a synchronous write waits for the forge (`--git-push-timeout` seconds, default 5). */
        pushTimeoutMs: number;
      }
    | undefined;
  /** Shared secret of the forge's push webhook (`POST /hooks/git`); without it the route refuses. */
  webhookSecret: string | undefined;
}

/** `true`/`false` (any case); anything else is a typo that must not quietly mean one of them. */
function parseSwitch(name: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  const v = value.toLowerCase();
  if (v !== 'true' && v !== 'false') throw new Error(`${name}: '${value}' is not true or false`);
  return v === 'true';
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function parseLogLevel(value: string | undefined): LogLevel {
  if (!value) return 'info';
  const level = value.toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level))
    throw new Error(`PEEROPS_LOG_LEVEL: '${value}' is not one of ${LOG_LEVELS.join(', ')}`);
  return level as LogLevel;
}

/** `HOST:PORT`, `:PORT`, `[v6]:PORT`. */
export function parseListen(value: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]*)):([0-9]{1,5})$/.exec(value.trim());
  const port = Number(match?.[3]);
  if (!match || !Number.isInteger(port) || port > 65535)
    throw new Error(`listen address '${value}' is not HOST:PORT (e.g. :8080, 127.0.0.1:8080, [::1]:8080)`);
  return { host: match[1] ?? match[2] ?? '', port };
}

const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * `true`, `false`, or a comma-separated list of the proxies' addresses and CIDRs. Not a hop count: fastify
 * trusts no sender for one (it cannot tell the proxy from a client that sends the header itself).
 */
export function parseTrustProxy(value: string | undefined): Config['trustProxy'] {
  if (value === undefined || value.trim() === '') return false;
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === 'false') return v === 'true';
  if (/^[0-9]+$/.test(v))
    throw new Error(
      `--trust-proxy (PEEROPS_TRUST_PROXY): '${value}' is a hop count, which trusts no proxy; ` +
        "list the proxies' addresses",
    );
  const list = v.split(',').map((s) => s.trim());
  for (const entry of list) {
    if (PROXY_RANGE_NAMES.has(entry)) continue;
    const [address = '', bits, extra] = entry.split('/');
    const max = ipaddr.IPv4.isValidFourPartDecimal(address) ? 32 : ipaddr.IPv6.isValid(address) ? 128 : 0;
    const prefix = bits === undefined ? max : /^[0-9]{1,3}$/.test(bits) ? Number(bits) : -1;
    if (max === 0 || extra !== undefined || prefix < 1 || prefix > max)
      throw new Error(
        `--trust-proxy (PEEROPS_TRUST_PROXY): '${entry}' is not an IP address, a CIDR (10.0.0.0/8), ` +
          'loopback, linklocal or uniquelocal; the setting is true, false or a comma-separated list of the proxies',
      );
  }
  return list;
}

function parseAsnList(value: string | undefined): number[] {
  if (!value) return [];
  return value
    .split(',')
    .map((s) => s.trim().replace(/^AS/i, ''))
    .filter((s) => s !== '')
    .map((s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 1 || n > 4294967295)
        throw new Error(`PEEROPS_ADMIN_ASNS: '${s}' is not an ASN`);
      return n;
    });
}

function parseTtl(value: string | undefined): number {
  if (!value) return 12 * 3600;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 60 || n > 366 * 24 * 3600)
    throw new Error(`PEEROPS_TOKEN_TTL: '${value}' is not a number of seconds from 60 to 31622400`);
  return n;
}

function parseIdleTimeout(value: string | undefined): number {
  if (!value) return DEFAULT_IDLE_SECONDS;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 60 || n > 366 * 24 * 3600)
    throw new Error(`PEEROPS_PORTAL_IDLE_TIMEOUT: '${value}' is not a number of seconds from 60 to 31622400`);
  return n;
}

function parseWebhook(env: NodeJS.ProcessEnv, store: Config['store']): Config['webhook'] {
  const listen = env.PEEROPS_WEBHOOK_LISTEN || undefined;
  const certDir = env.PEEROPS_WEBHOOK_CERT_DIR || undefined;
  if (listen === undefined && certDir === undefined) return undefined;
  if (listen === undefined || certDir === undefined)
    throw new Error('PEEROPS_WEBHOOK_LISTEN and PEEROPS_WEBHOOK_CERT_DIR go together: set both or neither');
  if (store !== 'kubernetes')
    throw new Error('PEEROPS_WEBHOOK_LISTEN: the admission webhook is for PEEROPS_STORE=kubernetes');
  return { listen: parseListen(listen), certDir: resolve(certDir) };
}

/** An http(s) URL of Prometheus, without query or credentials (they would show in logs). */
function parseHistoryPrometheus(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--history-prometheus must be an http(s) URL, not '${value}'`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.search || url.username || url.password)
    throw new Error(
      `--history-prometheus must be an http(s) URL without query or credentials, not '${value}'`,
    );
  return value;
}

export interface Flags {
  listen?: string | undefined;
  trustProxy?: string | undefined;
  data?: string | undefined;
  gitRemote?: string | undefined;
  gitBranch?: string | undefined;
  gitPushMode?: string | undefined;
  gitPushTimeout?: string | undefined;
  historyPrometheus?: string | undefined;
}

function parseGit(flags: Flags, env: NodeJS.ProcessEnv): GitConfig {
  const branch = gitBranch(flags.gitBranch, env);
  const remoteUrl = flags.gitRemote ?? (env.PEEROPS_GIT_REMOTE || undefined);
  const webhookSecret = secret(env, 'PEEROPS_GIT_WEBHOOK_SECRET');
  if (remoteUrl === undefined) return { branch, remote: undefined, webhookSecret };
  const { url, credentials } = gitRemote(remoteUrl, env);
  const seconds = env.PEEROPS_GIT_INTERVAL ? Number(env.PEEROPS_GIT_INTERVAL) : 5;
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 3600)
    throw new Error(
      `PEEROPS_GIT_INTERVAL: '${env.PEEROPS_GIT_INTERVAL}' is not a number of seconds from 1 to 3600`,
    );
  const pushMode = flags.gitPushMode ?? (env.PEEROPS_GIT_PUSH_MODE || 'sync');
  if (pushMode !== 'sync' && pushMode !== 'async')
    throw new Error(`--git-push-mode (PEEROPS_GIT_PUSH_MODE): '${pushMode}' is not sync or async`);
  const timeout = flags.gitPushTimeout ?? (env.PEEROPS_GIT_PUSH_TIMEOUT || '5');
  const timeoutSeconds = Number(timeout);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(timeout) || timeoutSeconds < 1 || timeoutSeconds > 60)
    throw new Error(
      `--git-push-timeout (PEEROPS_GIT_PUSH_TIMEOUT): '${timeout}' is not a number of seconds from 1 to 60`,
    );
  return {
    branch,
    remote: {
      url,
      intervalMs: seconds * 1000,
      ...(credentials ? { credentials } : {}),
      pushMode,
      pushTimeoutMs: timeoutSeconds * 1000,
    },
    webhookSecret,
  };
}

export function loadConfig(flags: Flags = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const store = env.PEEROPS_STORE ?? 'git';
  if (store !== 'git' && store !== 'kubernetes')
    throw new Error(`PEEROPS_STORE must be 'git' or 'kubernetes', not '${store}'`);
  if (flags.data === '') throw new Error('--data must name a directory');
  // An empty variable counts as unset, as for every other PEEROPS_* variable: a manifest that sets
  // PEEROPS_DATA="" means the default, not the working directory.
  return {
    // loopback unless told otherwise: the API has no TLS of its own (docs/operator-guide.md, 1)
    listen: parseListen(flags.listen ?? (env.PEEROPS_LISTEN || '127.0.0.1:8080')),
    // off: X-Forwarded-For is anyone's to write unless it comes from a proxy named here
    trustProxy: parseTrustProxy(flags.trustProxy ?? env.PEEROPS_TRUST_PROXY),
    dataDir: resolve(flags.data ?? (env.PEEROPS_DATA || './data')),
    store,
    jwtKeyFile: env.PEEROPS_JWT_KEY_FILE || undefined,
    agentAutoUpdate: parseSwitch('AGENT_AUTOUPDATE', env.AGENT_AUTOUPDATE, true),
    redisUrl: env.PEEROPS_REDIS_URL || undefined,
    historyPrometheus: parseHistoryPrometheus(
      flags.historyPrometheus ?? (env.PEEROPS_HISTORY_PROMETHEUS || undefined),
    ),
    rateLimit: { perMinute: 60, agentPerMinute: 300 },
    registry: env.PEEROPS_REGISTRY || undefined,
    autoApproveWithoutRegistry: parseSwitch(
      'PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY',
      env.PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY,
      false,
    ),
    adminAsns: parseAsnList(env.PEEROPS_ADMIN_ASNS),
    serviceHost: env.PEEROPS_SERVICE_HOST || undefined,
    tokenTtlSeconds: parseTtl(env.PEEROPS_TOKEN_TTL),
    portalIdleSeconds: parseIdleTimeout(env.PEEROPS_PORTAL_IDLE_TIMEOUT),
    logLevel: parseLogLevel(env.PEEROPS_LOG_LEVEL),
    stuckAfterSeconds: 600,
    offlineAfterSeconds: 300,
    bodyLimitBytes: 64 * 1024,
    maxLongPollSeconds: 300,
    webhook: parseWebhook(env, store),
    git: parseGit(flags, env),
  };
}
