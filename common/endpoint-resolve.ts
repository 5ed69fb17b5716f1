/**
 * A session's endpoint as WireGuard receives it: an address, judged by the endpoint rules the controller
 * applies (common/net.ts endpointAddressProblem; docs/agent.md, endpoint resolution). A host name is
 * resolved here, once per pass, and `wg set` gets the address: given the name, WireGuard would resolve
 * it again after the check, and a name can answer differently the second time (DNS rebinding). The
 * controller resolves a peer's endpoint the same way before its routers ping it (the nearest router,
 * controller/looking-glass/nearest.ts). Node only: the portal does not import it.
 */
import { lookup } from 'node:dns/promises';
import {
  endpointAddressProblem,
  endpointProblem,
  formatEndpoint,
  isIpv4,
  isIpv6,
  parseEndpoint,
} from './net.ts';
import { saidText } from './messages.ts';

/** Every address a host name resolves to, in the resolver's order. */
export type Resolve = (host: string) => Promise<string[]>;

/** The system's resolver (getaddrinfo: /etc/hosts, then DNS), as `wg set` would have used it. */
export const systemResolve: Resolve = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** A lookup that never answers must not hold the pass: the session fails and is retried. */
export const RESOLVE_TIMEOUT_MS = 5_000;

export class EndpointRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EndpointRefused';
  }
}

/**
 * `address:port` for WireGuard, or EndpointRefused saying why the endpoint is not set. A name is refused
 * when any address it resolves to is: the resolver's order decides which one a later lookup would give.
 */
export async function resolveEndpoint(
  endpoint: string,
  allowPrivate: boolean,
  resolve: Resolve = systemResolve,
  timeoutMs = RESOLVE_TIMEOUT_MS,
): Promise<string> {
  const parsed = parseEndpoint(endpoint);
  if (!parsed) throw new EndpointRefused(`endpoint ${endpoint} is not host:port`);
  const literal = isIpv4(parsed.host) || isIpv6(parsed.host);
  const own = endpointProblem(endpoint, allowPrivate);
  if (own !== undefined)
    throw new EndpointRefused(`endpoint ${endpoint} ${saidText(own)}: not set on WireGuard`);
  if (literal) return formatEndpoint(parsed);
  let timer: NodeJS.Timeout | undefined;
  let addresses: string[];
  try {
    addresses = await Promise.race([
      resolve(parsed.host),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } catch (err) {
    throw new EndpointRefused(
      `endpoint ${endpoint}: ${parsed.host} does not resolve (${(err as Error).message})`,
    );
  } finally {
    clearTimeout(timer);
  }
  const usable = addresses.filter((a) => isIpv4(a) || isIpv6(a));
  if (usable.length === 0)
    throw new EndpointRefused(`endpoint ${endpoint}: ${parsed.host} resolves to no address`);
  for (const address of usable) {
    const problem = endpointAddressProblem(address, allowPrivate);
    if (problem !== undefined)
      throw new EndpointRefused(
        `endpoint ${endpoint}: ${parsed.host} resolves to ${address}, which ${saidText(problem)}: not set on WireGuard`,
      );
  }
  return formatEndpoint({ host: usable[0]!, port: parsed.port });
}
