/**
 * The agent's configuration file (docs/agent.md, Config): one TypeBox schema holding every section, key and
 * default. Full mode gives every section; bootstrap mode gives only `controlPlane.url`,
 * `controlPlane.token`, `server.listen` and `node.name`, and the rest comes from
 * `GET /agent/:router/config` (mergeBootstrap). A bad file is refused with the file, the key (JSON
 * pointer) and the reason; unknown keys are refused.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import ipaddr from 'ipaddr.js';
import Type, { type Static } from 'typebox';
import type { BootstrapConfigResponse } from '../common/agent-api.ts';
import type { FieldError } from '../common/errors.ts';
import { Ipv4, Ipv6, LinkLocal, RouterName } from '../common/schema.ts';
import { validate } from '../common/validate.ts';
import { SSH_PUBLIC_KEY_PATTERN } from './update/signature.ts';

/** A problem of the agent's own config file: read on the router, so never keyed for a client. */
type ConfigProblem = Pick<FieldError, 'pointer' | 'message'>;

const Seconds = (def: number) => Type.Integer({ minimum: 1, maximum: 86400, default: def });
const Path = Type.String({ minLength: 1, maxLength: 4096, pattern: '^/' });

export const AgentConfigFile = Type.Object(
  {
    server: Type.Object(
      {
        listen: Type.String({
          default: ':24368',
          pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.-]*):[0-9]{1,5}$',
        }),
        readTimeout: Seconds(30),
        writeTimeout: Seconds(30),
        idleTimeout: Seconds(120),
        /** Addresses besides loopback and the controller's that may reach the local server. */
        allowFrom: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 64 })),
      },
      { additionalProperties: false, default: {} },
    ),
    node: Type.Object(
      {
        name: RouterName,
        id: Type.Optional(Type.Integer({ minimum: 1, maximum: 4095 })),
        region: Type.Optional(Type.String({ maxLength: 64 })),
        location: Type.Optional(Type.String({ maxLength: 64 })),
        provider: Type.Optional(Type.String({ maxLength: 64 })),
      },
      { additionalProperties: false },
    ),
    controlPlane: Type.Object(
      {
        url: Type.String({ pattern: '^https?://[^\\s]+$', maxLength: 2048 }),
        token: Type.String({ minLength: 16, maxLength: 512, pattern: '^[\\x21-\\x7e]+$' }),
        requestTimeout: Seconds(15),
        heartbeatInterval: Seconds(30),
        syncInterval: Seconds(60),
        metricInterval: Seconds(60),
        maxRetries: Type.Integer({ minimum: 0, maximum: 100, default: 3 }),
        retryInitialDelay: Type.Integer({ minimum: 1, maximum: 600_000, default: 1000 }),
        // the longest wait between tries of an unreachable controller (± 25 %): how soon the agent is
        // back after an outage (docs/agent.md, "When the controller is down")
        retryMaxDelay: Type.Integer({ minimum: 100, maximum: 60_000, default: 2000 }),
      },
      { additionalProperties: false },
    ),
    routing: Type.Object(
      {
        controlSocket: Type.String({ ...Path, default: '/run/bird/bird.ctl' }),
        poolSize: Type.Integer({ minimum: 1, maximum: 1024, default: 5 }),
        poolSizeMax: Type.Integer({ minimum: 1, maximum: 1024, default: 64 }),
        peerConfDir: Type.String({ ...Path, default: '/etc/bird/peers' }),
        ebgpConfTemplateFile: Type.Optional(Path),
        ibgpConfDir: Type.String({ ...Path, default: '/etc/bird/ibgp.d' }),
      },
      { additionalProperties: false, default: {} },
    ),
    tunnel: Type.Object(
      {
        privateKeyPath: Type.Optional(Path),
        publicKeyPath: Type.Optional(Path),
        configDir: Type.String({ ...Path, default: '/etc/wireguard' }),
        persistentKeepaliveInterval: Type.Integer({ minimum: 0, maximum: 65535, default: 25 }),
        // '' for none: the session tunnels then carry no address of that family
        dn42Ipv4: Type.Union([Type.Literal(''), Ipv4], { default: '' }),
        dn42Ipv6: Type.Union([Type.Literal(''), Ipv6], { default: '' }),
        dn42Ipv6LinkLocal: Type.Unsafe<string>({ ...LinkLocal, default: 'fe80::1' }),
      },
      { additionalProperties: false, default: {} },
    ),
    metric: Type.Object(
      {
        pingTimeout: Seconds(5),
        pingCount: Type.Integer({ minimum: 1, maximum: 100, default: 4 }),
        pingWorkers: Type.Integer({ minimum: 1, maximum: 1024, default: 32 }),
      },
      { additionalProperties: false, default: {} },
    ),
    lookingGlass: Type.Object(
      {
        /** bird-lg-go's proxy protocol (docs/agent.md, bird-lg-go); off unless set. */
        birdLgProxy: Type.Optional(
          Type.Object(
            {
              listen: Type.String({ pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.-]*):[0-9]{1,5}$' }),
              /** Addresses or prefixes that may ask, besides loopback. */
              allowFrom: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
                maxItems: 64,
                default: [],
              }),
            },
            { additionalProperties: false },
          ),
        ),
      },
      { additionalProperties: false, default: {} },
    ),
    autoUpdate: Type.Object(
      {
        enabled: Type.Boolean({ default: true }),
        checkInterval: Type.Integer({ minimum: 1, maximum: 100_000, default: 60 }),
        channel: Type.String({ enum: ['stable', 'beta', 'dev'], default: 'stable' }),
        releaseRepo: Type.String({
          minLength: 1,
          maxLength: 2048,
          default: 'peerops/peerops',
        }),
        // the release signing keys (agent/update/signature.ts); none configured: self-update stays off
        publicKeys: Type.Array(Type.String({ pattern: SSH_PUBLIC_KEY_PATTERN, maxLength: 4096 }), {
          maxItems: 16,
          default: [],
        }),
      },
      { additionalProperties: false, default: {} },
    ),
  },
  { additionalProperties: false },
);
export type AgentConfigFile = Static<typeof AgentConfigFile>;

/** The file after defaults, with the derived paths filled in. */
export type AgentConfig = AgentConfigFile & {
  mode: 'full' | 'bootstrap';
  tunnel: AgentConfigFile['tunnel'] & { privateKeyPath: string; publicKeyPath: string };
  /** The routing daemon's config root (parent of peerConfDir) and its main file `<root>/bird.conf`. */
  birdConfigRoot: string;
  birdMainConfig: string;
  /** From bootstrap or the file; the ASN is known once fetched. */
  asn?: number;
};

export class AgentConfigError extends Error {
  readonly file: string;
  readonly errors: ConfigProblem[];
  constructor(file: string, errors: ConfigProblem[]) {
    super(`${file}: ${errors.map((e) => `${e.pointer}: ${e.message}`).join('; ')}`);
    this.name = 'AgentConfigError';
    this.file = file;
    this.errors = errors;
  }
}

/** Seconds WireGuard waits before it retries a handshake (REKEY_TIMEOUT of the protocol). */
const WIREGUARD_REKEY_TIMEOUT = 5;

/** Validates a parsed config object; `file` names it in errors. */
export function parseConfig(input: unknown, file: string): AgentConfig {
  const result = validate<AgentConfigFile>(AgentConfigFile, input);
  if (!result.ok) throw new AgentConfigError(file, result.errors);
  const c = result.value;
  const errors: ConfigProblem[] = [];
  if (c.routing.poolSizeMax < c.routing.poolSize) {
    errors.push({ pointer: '/routing/poolSizeMax', message: 'must be at least routing.poolSize' });
  }
  const keepalive = c.tunnel.persistentKeepaliveInterval;
  if (keepalive > 0 && keepalive <= WIREGUARD_REKEY_TIMEOUT) {
    // Both ends of a mesh link keep alive: at or below the handshake retry interval their keepalive
    // timers fire in lock-step, the handshakes cross and each side drops the other's response, forever.
    errors.push({
      pointer: '/tunnel/persistentKeepaliveInterval',
      message: `must be 0 (off) or above ${WIREGUARD_REKEY_TIMEOUT} s, WireGuard's handshake retry interval`,
    });
  }
  const port = Number(c.server.listen.slice(c.server.listen.lastIndexOf(':') + 1));
  if (port > 65535)
    errors.push({ pointer: '/server/listen', message: 'port must be 0-65535 (0: any free port)' });
  const proxy = c.lookingGlass.birdLgProxy;
  if (proxy) {
    if (Number(proxy.listen.slice(proxy.listen.lastIndexOf(':') + 1)) > 65535)
      errors.push({ pointer: '/lookingGlass/birdLgProxy/listen', message: 'port must be 0-65535' });
    proxy.allowFrom.forEach((a, i) => {
      if (!(a.includes('/') ? ipaddr.isValidCIDR(a) : ipaddr.isValid(a)))
        errors.push({
          pointer: `/lookingGlass/birdLgProxy/allowFrom/${i}`,
          message: 'must be an IP address or a prefix (fd00::/8)',
        });
    });
  }
  if (errors.length) throw new AgentConfigError(file, errors);
  const root = dirname(c.routing.peerConfDir);
  return {
    ...c,
    mode: c.node.id === undefined ? 'bootstrap' : 'full',
    tunnel: {
      ...c.tunnel,
      privateKeyPath: c.tunnel.privateKeyPath ?? join(c.tunnel.configDir, 'private.key'),
      publicKeyPath: c.tunnel.publicKeyPath ?? join(c.tunnel.configDir, 'public.key'),
    },
    birdConfigRoot: root,
    birdMainConfig: join(root, 'bird.conf'),
  };
}

export async function loadConfig(file: string): Promise<AgentConfig> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new AgentConfigError(file, [{ pointer: '/', message: `cannot read: ${(err as Error).message}` }]);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new AgentConfigError(file, [{ pointer: '/', message: `not JSON: ${(err as Error).message}` }]);
  }
  return parseConfig(parsed, file);
}

/**
 * Fills a bootstrap-mode config from the controller's answer: node identity, addresses, intervals and
 * metric settings come from the controller (central management is what bootstrap mode is for). The
 * `autoUpdate` section stays the file's: the updater asks the controller before every check, and the
 * file's `enabled: false` must keep opting this node out.
 */
export function mergeBootstrap(config: AgentConfig, boot: BootstrapConfigResponse): AgentConfig {
  return {
    ...config,
    asn: boot.asn,
    node: { ...boot.node, name: config.node.name },
    controlPlane: { ...config.controlPlane, ...boot.controlPlane },
    tunnel: { ...config.tunnel, ...boot.tunnel },
    metric: { ...config.metric, ...boot.metric },
  };
}

/** `:24368` → all addresses; `[::1]:8080`, `127.0.0.1:8080`. */
export function parseListen(listen: string): { host: string | undefined; port: number } {
  const i = listen.lastIndexOf(':');
  const host = listen.slice(0, i).replace(/^\[|\]$/g, '');
  return { host: host || undefined, port: Number(listen.slice(i + 1)) };
}
