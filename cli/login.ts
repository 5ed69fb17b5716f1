/**
 * `peerops login --asn N [--ssh-key PATH | --gpg KEYID] [--url URL] [--context NAME]`: fetch a challenge,
 * sign it with ssh-keygen or gpg, trade the signature for a JWT and keep it with the URL as a context
 * (cli/config.ts; docs/cli.md, "Contexts"), which becomes the current one.
 * Without --ssh-key or --gpg, the first of ~/.ssh/id_{ed25519,ecdsa,rsa} whose public key the
 * registry lists for the ASN is used.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import * as path from 'node:path';
import { parseChallengeText, SSH_NAMESPACE } from '../common/login-challenge.ts';
import { createDecoder } from 'fast-jwt';
import { usageError } from '../common/usage.ts';
import { checkUrl, CliError, DEFAULT_URL, EXIT, fetchFailure, parseFlags } from './client.ts';
import { contextName, saveContext } from './config.ts';

const USAGE = `usage: peerops login --asn N [--ssh-key PATH | --gpg KEYID] [--url URL] [--context NAME]
                     [--expect-host HOST]

  --asn N            the ASN you log in for (4242420001 or AS4242420001)
  --ssh-key PATH     sign with this SSH key (ssh-keygen -Y sign -n peerops); PATH may be a private key
                     or, with ssh-agent holding the key, its .pub
  --gpg KEYID        sign with this OpenPGP key (gpg --detach-sign --armor -u KEYID); its public key
                     (gpg --export --armor) is sent along
  --url URL          the peerops API (default $PEEROPS_URL or http://localhost:8080)
  --context NAME     save the login as this context (default AS<asn>@<host>)
  --expect-host HOST sign challenges for HOST although the URL names another host (e.g. an SSH tunnel)

The URL and token are saved as a context in $XDG_CONFIG_HOME/peerops/config.yaml (default
~/.config/peerops/config.yaml, mode 0600), which becomes the current one; 'peerops context list' shows
them. A login replaces only the token of the same context (the output says whose that was).`;

const CHALLENGE_SKEW_MS = 15 * 60_000;

interface ChallengeAnswer {
  challenge: string;
  host: string;
  expiresAt: string;
  namespace: string;
  methods: Array<{ type: string; mntner: string; key?: string; fingerprint?: string; keyCert?: string }>;
}

interface TokenAnswer {
  token: string;
  expiresAt: string;
  role: string;
}

const decodeToken = createDecoder();

class LoginError extends Error {
  override name = 'LoginError';
  /** The controller could not be reached: exit status 3 (docs/cli.md, "Exit status"). */
  unreachable = false;
}

/** Who a saved token was for, read without verifying it (only to say what a login replaced). */
function describeToken(token: string): string {
  try {
    const claims = decodeToken(token) as { asn?: unknown; role?: unknown; exp?: unknown };
    const expiry = typeof claims.exp === 'number' ? new Date(claims.exp * 1000) : undefined;
    return [
      `AS${String(claims.asn)} (${String(claims.role)})`,
      ...(expiry
        ? [`${expiry.getTime() < Date.now() ? 'expired' : 'valid until'} ${expiry.toISOString()}`]
        : []),
    ].join(', ');
  } catch {
    return 'one that is not a peerops token';
  }
}

function parseAsn(value: string): number {
  const n = Number(value.replace(/^AS/i, ''));
  if (!Number.isInteger(n) || n < 1 || n > 4294967295)
    throw new CliError('USAGE', `--asn: '${value}' is not an ASN`);
  return n;
}

/**
 * Runs a signing tool. Its stderr ("Signing file …") is kept and shown only when it fails; passphrase
 * prompts still reach the user, ssh-keygen and gpg's pinentry ask on the terminal itself.
 */
function runTool(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['inherit', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => reject(new LoginError(`cannot run ${cmd}: ${e.message}`)));
    child.on('close', (code) => {
      if (code === 0) return resolve(Buffer.concat(out).toString('utf8'));
      const said = Buffer.concat(err).toString('utf8').trim();
      reject(
        new LoginError(`${cmd} ${args[0] ?? ''} failed (exit status ${code})${said ? `:\n${said}` : ''}`),
      );
    });
  });
}

async function post<T>(url: string, body: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    const e = new LoginError(fetchFailure(err, url.replace(/\/login$/, '')));
    e.unreachable = true;
    throw e;
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new LoginError(`${url} answered ${res.status} with a body that is not JSON`);
  }
  if (!res.ok) {
    const p = json as { code?: string; detail?: string };
    throw new LoginError(`${p.code ?? res.status}: ${p.detail ?? text}`);
  }
  return json as T;
}

/** The signing key when none was named: a default SSH key the registry lists for the ASN. */
async function defaultSshKey(methods: ChallengeAnswer['methods']): Promise<string> {
  const listed = new Set(methods.map((m) => m.key).filter((k) => k !== undefined));
  for (const name of ['id_ed25519', 'id_ecdsa', 'id_rsa']) {
    const file = path.join(homedir(), '.ssh', name);
    if (!existsSync(`${file}.pub`)) continue;
    const blob = (await readFile(`${file}.pub`, 'utf8')).trim().split(/\s+/)[1];
    if (blob && listed.has(blob)) return file;
  }
  throw new LoginError('give --ssh-key PATH or --gpg KEYID: no key in ~/.ssh is listed for this ASN');
}

/**
 * Signs only a peerops challenge for this host and ASN that has not expired. Anything else may be
 * another service's challenge relayed through this one, or bytes that mean something elsewhere.
 */
function checkChallenge(c: ChallengeAnswer, asn: number, expectHost: string): void {
  const fields = parseChallengeText(c.challenge);
  if (!fields)
    throw new LoginError(
      'the server sent something that is not a peerops login challenge; refusing to sign it',
    );
  // A challenge for another host may be one relayed from another service: never sign it.
  if (fields.host !== expectHost)
    throw new LoginError(
      `the challenge is for host '${fields.host}' but you are talking to '${expectHost}'; refusing to sign (use --expect-host ${fields.host} if that is really this service)`,
    );
  if (fields.asn !== asn)
    throw new LoginError(`the challenge is for AS${fields.asn}, not AS${asn}; refusing to sign`);
  // the server enforces its 5 minutes; this only refuses what no clock skew explains
  if (Math.abs(fields.expiresAt - Date.now()) > CHALLENGE_SKEW_MS)
    throw new LoginError(
      `the challenge expires ${new Date(fields.expiresAt).toISOString()}, far from this machine's time; refusing to sign`,
    );
  if (c.namespace !== SSH_NAMESPACE)
    throw new LoginError(
      `the server asks for SSH namespace '${c.namespace}', not '${SSH_NAMESPACE}'; refusing to sign`,
    );
}

async function sign(
  challenge: ChallengeAnswer,
  opts: { sshKey: string | undefined; gpg: string | undefined },
): Promise<{ signature: string; publicKey?: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'peerops-login-'));
  try {
    const file = path.join(dir, 'challenge');
    await writeFile(file, challenge.challenge, { mode: 0o600 });
    if (opts.gpg) {
      const signature = await runTool('gpg', ['--armor', '--detach-sign', '-u', opts.gpg, '-o', '-', file]);
      const publicKey = await runTool('gpg', ['--export', '--armor', opts.gpg]);
      if (!publicKey.includes('BEGIN PGP PUBLIC KEY BLOCK')) {
        throw new LoginError(`gpg has no public key for '${opts.gpg}'`);
      }
      return { signature, publicKey };
    }
    const key = opts.sshKey ?? (await defaultSshKey(challenge.methods));
    await runTool('ssh-keygen', ['-Y', 'sign', '-n', SSH_NAMESPACE, '-f', key, file]);
    return { signature: await readFile(`${file}.sig`, 'utf8') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export const OPTIONS = {
  asn: { type: 'string' },
  'ssh-key': { type: 'string' },
  gpg: { type: 'string' },
  url: { type: 'string' },
  context: { type: 'string' },
  'expect-host': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export async function main(argv: string[]): Promise<number> {
  let values: ReturnType<typeof parseFlags<typeof OPTIONS>>['values'];
  let positionals: string[];
  try {
    ({ values, positionals } = parseFlags(argv, OPTIONS));
    if (positionals.length) throw new CliError('USAGE', `unexpected argument '${positionals[0]}'`);
  } catch (err) {
    if (err instanceof CliError) return usageError(err.message);
    throw err;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (!values.asn || (values['ssh-key'] && values.gpg))
    return usageError(
      `${values.asn ? 'give --ssh-key or --gpg, not both' : '--asn is required'}\n\n${USAGE}`,
    );
  try {
    const asn = parseAsn(values.asn);
    const base = checkUrl(values.url ?? (process.env.PEEROPS_URL || undefined) ?? DEFAULT_URL);
    let expectHost: string;
    try {
      expectHost = values['expect-host'] ?? new URL(base).hostname.replace(/^\[|\]$/g, '');
    } catch {
      throw new CliError('USAGE', `--url: '${base}' is not a URL`);
    }
    const url = `${base}/login`;
    const c = await post<ChallengeAnswer>(url, { action: 'challenge', asn });
    checkChallenge(c, asn, expectHost);
    const signed = await sign(c, { sshKey: values['ssh-key'], gpg: values.gpg });
    const t = await post<TokenAnswer>(url, { action: 'verify', asn, challenge: c.challenge, ...signed });
    const name = values.context ?? contextName(asn, base);
    const { file, replaced } = await saveContext({ name, url: base, token: t.token });
    console.log(
      `Logged in to ${base} as AS${asn} (${t.role}) until ${t.expiresAt}.\nSaved as context ${name} (now current) in ${file}.`,
    );
    // Say which token went: replacing an admin token with a user one silently would leave the admin
    // wondering where their rights went.
    if (replaced?.token !== undefined && replaced.token !== t.token)
      console.log(`It replaced the token saved before: ${describeToken(replaced.token)}.`);
    return EXIT.OK;
  } catch (err) {
    if (err instanceof CliError && err.code === 'USAGE') return usageError(err.message);
    if (!(err instanceof LoginError)) throw err;
    console.error(`peerops login: ${err.message}`);
    return err.unreachable ? EXIT.UNREACHABLE : EXIT.REFUSED;
  }
}
