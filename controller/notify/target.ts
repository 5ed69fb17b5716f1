/**
 * Where one delivery attempt connects, and the request itself (docs/notifications.md, "Where a hook may
 * point"): the hook's host is resolved once, within a time limit; a peer's hook is refused when any address
 * is not public; the request then goes to exactly the address that was checked. A name that answers
 * differently the next time (DNS rebinding) cannot move the connection, since nothing resolves it again.
 */
import { Resolver, lookup } from 'node:dns/promises';
import { request as httpRequest, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { internetAddressProblem } from '../../common/net.ts';
import { saidText } from '../../common/messages.ts';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

export interface TargetRules {
  /** The longest a name may take to resolve. */
  dnsTimeoutMs: number;
  /** The DNS servers for peers' names (`host` or `host:port`); default the system's (resolv.conf). */
  dnsServers?: readonly string[] | undefined;
  /** Non-public addresses peers' hooks may reach anyway: all (true), none (false) or these ranges. */
  allowPrivate: boolean | readonly Range[];
}

/** A delivery that must not be made: a peer's hook whose host is (or resolves to) a non-public address. */
export class RefusedTarget extends Error {
  override readonly name = 'RefusedTarget';
}

/** A delivery attempt's address: checked, and the one connected to. */
export interface Target {
  address: string;
  family: 4 | 6;
}

/**
 * `PEEROPS_NOTIFY_ALLOW_PRIVATE`'s list form (`10.1.0.0/16,fd00:1::/48`): the ranges, or an error naming
 * the variable and the entry it cannot read.
 */
export function parseRanges(list: readonly string[], what: string): Range[] {
  return list.map((cidr) => {
    try {
      return ipaddr.parseCIDR(cidr);
    } catch {
      throw new Error(`${what}: ${JSON.stringify(cidr)} is not an address range (like 10.1.0.0/16)`);
    }
  });
}

/**
 * Why a peer's hook may not reach `address`, if it may not: the rule of WireGuard endpoints
 * (common/net.ts internetAddressProblem), private ranges only where PEEROPS_NOTIFY_ALLOW_PRIVATE allows.
 */
function forbidden(address: string, allow: TargetRules['allowPrivate']): string | undefined {
  if (allow === true) return undefined;
  const parsed = ipaddr.process(address);
  if (allow !== false && allow.some((r) => parsed.kind() === r[0].kind() && parsed.match(r)))
    return undefined;
  const said = internetAddressProblem(parsed, { allowed: false, allowedBy: 'PEEROPS_NOTIFY_ALLOW_PRIVATE' });
  return said && saidText(said);
}

/**
 * Why a peer's hook at `url` can never be delivered, known before any DNS: its host is an address
 * literal the rules refuse. A name is judged at each delivery, on what it resolves to.
 */
export function literalTargetProblem(url: URL, rules: Pick<TargetRules, 'allowPrivate'>): string | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return isIP(host) === 0 ? undefined : forbidden(host, rules.allowPrivate);
}

function timeout(host: string, ms: number): Error {
  const err = new Error(`DNS: no answer for ${host} within ${ms} ms`);
  err.name = 'DnsTimeout';
  return err;
}

/**
 * A peer's name, through DNS only (c-ares, off libuv's thread pool: a resolver that never answers holds no
 * thread the controller's file access needs, as getaddrinfo would), A and AAAA at once, bounded in time.
 */
async function resolveDns(host: string, rules: TargetRules): Promise<string[]> {
  const resolver = new Resolver({ timeout: rules.dnsTimeoutMs, tries: 1 });
  if (rules.dnsServers) resolver.setServers(rules.dnsServers);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      resolver.cancel();
      reject(timeout(host, rules.dnsTimeoutMs));
    }, rules.dnsTimeoutMs);
  });
  try {
    const [v4, v6] = await Promise.race([
      Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]),
      expired,
    ]);
    const addresses = [v4, v6].flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
    if (addresses.length > 0) return addresses;
    const reason = v4.status === 'rejected' ? (v4.reason as Error) : undefined;
    throw new Error(`DNS: ${host} has no address${reason ? ` (${reason.message})` : ''}`);
  } finally {
    clearTimeout(timer);
  }
}

/** An admin's name as the system resolves it (hosts file, search domains: an internal bridge), bounded. */
async function resolveSystem(host: string, rules: TargetRules): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeout(host, rules.dnsTimeoutMs)), rules.dnsTimeoutMs);
  });
  try {
    const found = await Promise.race([lookup(host, { all: true, verbatim: true }), expired]);
    return found.map((a) => a.address);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The address to connect to for `url`: its literal, or its name resolved once. A peer's hook (`peer`) is
 * refused when any of the name's addresses is not public, not just the one connected to: the answer
 * could be ordered otherwise next time.
 */
export async function resolveTarget(url: URL, peer: boolean, rules: TargetRules): Promise<Target> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses =
    isIP(host) !== 0 ? [host] : await (peer ? resolveDns(host, rules) : resolveSystem(host, rules));
  if (peer)
    for (const address of addresses) {
      const why = forbidden(address, rules.allowPrivate);
      if (why) throw new RefusedTarget(`${url.hostname}: ${address} ${why}`);
    }
  const address = addresses[0] as string;
  return { address, family: isIP(address) === 6 ? 6 : 4 };
}

/**
 * POSTs `body` to `url` over a connection to `target.address` only (the URL's name stays the Host header
 * and the TLS server name the certificate is checked against); the answer's status. `timeoutMs` bounds
 * connecting and the answer's headers; the answer's body is not read.
 */
export function post(
  url: URL,
  target: Target,
  headers: OutgoingHttpHeaders,
  body: string,
  timeoutMs: number,
): Promise<number> {
  const pinned: LookupFunction = (_host, options, callback) => {
    if (options.all) callback(null, [target]);
    else callback(null, target.address, target.family);
  };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        agent: false,
        lookup: pinned,
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        res.destroy();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
