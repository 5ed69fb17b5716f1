/**
 * Contexts, as kubectl and gh keep them (docs/cli.md, "Contexts"): each network's controller URL and token
 * under a name in `config.yaml` of the config dir, one of them current. A login to a second network (or
 * as a second ASN) adds a context instead of replacing the first one's token.
 */
import { mkdir, readFile, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { dump, load } from 'js-yaml';
import { atomicWriteFile } from '../common/atomic-write.ts';

export const DEFAULT_URL = 'http://localhost:8080';

export interface Context {
  name: string;
  url: string;
  token?: string;
}

export interface Config {
  currentContext?: string;
  contexts: Context[];
}

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PEEROPS_CONFIG_DIR) return env.PEEROPS_CONFIG_DIR;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'peerops');
}

/** A config file that cannot be used: said as a usage error, the user has to fix it. */
export class CliConfigError extends Error {
  override name = 'CliConfigError';
}

function parseConfig(text: string, file: string): Config {
  let raw: unknown;
  try {
    raw = load(text);
  } catch (err) {
    throw new CliConfigError(`${file}: not YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (raw === null || raw === undefined) return { contexts: [] };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new CliConfigError(`${file}: not a mapping`);
  const r = raw as Record<string, unknown>;
  const list = Array.isArray(r.contexts) ? (r.contexts as unknown[]) : [];
  const contexts: Context[] = [];
  for (const c of list) {
    if (!c || typeof c !== 'object') continue;
    const { name, url, token } = c as Record<string, unknown>;
    if (typeof name !== 'string' || typeof url !== 'string')
      throw new CliConfigError(`${file}: every context needs a name and a url`);
    contexts.push({ name, url, ...(typeof token === 'string' ? { token } : {}) });
  }
  const current = r['current-context'];
  return { contexts, ...(typeof current === 'string' ? { currentContext: current } : {}) };
}

/**
 * The config; when there is none but the single token file of older versions is there, a context made of
 * it (saved, the old file removed, and said once on stderr).
 */
export async function loadConfig(env: NodeJS.ProcessEnv = process.env): Promise<Config> {
  const dir = configDir(env);
  const file = join(dir, 'config.yaml');
  try {
    return parseConfig(await readFile(file, 'utf8'), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const legacy = await readLegacyToken(dir);
  if (legacy === undefined) return { contexts: [] };
  const url = (env.PEEROPS_URL || DEFAULT_URL).replace(/\/+$/, '');
  const name = contextName(tokenAsn(legacy), url);
  const config: Config = { currentContext: name, contexts: [{ name, url, token: legacy }] };
  await saveConfig(config, env);
  // moved, not copied: one copy of a credential to keep safe, and no second file to wonder about
  await rm(join(dir, 'token'), { force: true });
  console.error(`peerops: moved the token of ${join(dir, 'token')} into context ${name} of ${file}`);
  return config;
}

async function readLegacyToken(dir: string): Promise<string | undefined> {
  try {
    const token = (await readFile(join(dir, 'token'), 'utf8')).trim();
    return token || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Mode 0600 in a 0700 dir, written atomically: the file holds credentials. Returns the file. */
export async function saveConfig(config: Config, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const dir = configDir(env);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'config.yaml');
  const doc = {
    ...(config.currentContext !== undefined ? { 'current-context': config.currentContext } : {}),
    contexts: config.contexts.map((c) => ({
      name: c.name,
      url: c.url,
      ...(c.token ? { token: c.token } : {}),
    })),
  };
  await atomicWriteFile(file, dump(doc), { mode: 0o600 });
  return file;
}

/** The ASN a token names, read without verifying it (only to name a context). */
export function tokenAsn(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { asn?: unknown };
    return typeof claims.asn === 'number' ? claims.asn : undefined;
  } catch {
    return undefined;
  }
}

/** `AS<asn>@<host[:port]>`, the default context name. */
export function contextName(asn: number | undefined, url: string): string {
  let host = url;
  try {
    host = new URL(url).host;
  } catch {
    // an unparsable URL is refused elsewhere; the name only has to be stable
  }
  return `${asn === undefined ? 'unknown' : `AS${asn}`}@${host}`;
}

/** Adds or replaces the context `ctx.name` and makes it current; answers the file and what it replaced. */
export async function saveContext(
  ctx: Context,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ file: string; replaced: Context | undefined }> {
  const config = await loadConfig(env);
  const replaced = config.contexts.find((c) => c.name === ctx.name);
  config.contexts = [...config.contexts.filter((c) => c.name !== ctx.name), ctx];
  config.currentContext = ctx.name;
  return { file: await saveConfig(config, env), replaced };
}

/**
 * The context to use: `--context`, else PEEROPS_CONTEXT, else the current one. A name given but not saved
 * is an error; no context at all is undefined (the defaults apply).
 */
export async function selectContext(
  name: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Context | undefined> {
  const config = await loadConfig(env);
  const wanted = name ?? (env.PEEROPS_CONTEXT || undefined);
  if (wanted !== undefined) {
    const ctx = config.contexts.find((c) => c.name === wanted);
    if (!ctx)
      throw new CliConfigError(
        `no context '${wanted}' (${config.contexts.length ? `saved: ${config.contexts.map((c) => c.name).join(', ')}` : 'none saved; peerops login saves one'})`,
      );
    return ctx;
  }
  return config.contexts.find((c) => c.name === config.currentContext);
}
