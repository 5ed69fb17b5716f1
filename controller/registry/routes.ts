/**
 * Whose network an address is, by the DN42 registry's route objects (`data/route/<prefix>_<len>`,
 * `data/route6/…`, `origin:`) and its prefix filter (`data/filter.txt`, `data/filter6.txt`), as DN42
 * routes it: an address belongs to the origin of the most specific route object covering it that the
 * filter permits (docs/login.md, Route objects). A session's peer addresses become routes into that
 * peer's tunnel on the router, so an address of another network's object would capture its traffic.
 */
import { type FieldError } from '../../common/errors.ts';
import {
  BUILTIN_FILTER,
  FILTER_FILES,
  filterRuleFor,
  parseFilter,
  type Dn42Filter,
  type Dn42FilterRule,
} from '../../common/dn42-filter.ts';
import { canonicalPrefix, inRanges, isIpv4, parsePrefix, type Family } from '../../common/net.ts';
import { nameValue, parseRpsl, values } from '../auth/login/rpsl.ts';
import { fieldAtFault, fieldError, type FieldSaid, problem } from '../../common/messages.ts';

/** A registry's files at one version: what routes and the filter are read from. */
export interface RegistryFiles {
  /** The file names in one directory (`data/route6`); an empty list when it does not exist. */
  list(dir: string): Promise<string[]>;
  /** One file by its path under the registry root; undefined when it does not exist. */
  read(file: string): Promise<string | undefined>;
}

/** Where route objects come from: a login registry (controller/auth/login/registry.ts), if it has them. */
export interface RouteSource {
  /** The registry's files at its current version; absent from a users file. Throws REGISTRY_UNAVAILABLE. */
  files?(): Promise<RegistryFiles>;
  close(): Promise<void>;
}

/** A `route` (IPv4) or `route6` object of a DN42 registry. */
export interface RouteObject {
  type: 'route' | 'route6';
  /** Its prefix, canonical (`route:` / `route6:`). */
  prefix: string;
  /** Every `origin:` ASN. */
  origins: number[];
  /** The filter line that decides its prefix; undefined when none matches (denied). */
  rule: Dn42FilterRule | undefined;
}

/** Does the filter let the object count (its deciding line permits it)? */
export const permitted = (o: RouteObject): boolean => o.rule?.action === 'permit';

/**
 * The registry's filter: its filter.txt / filter6.txt, or the built-in copy for a family whose file is
 * missing. A file that does not parse throws REGISTRY_UNAVAILABLE naming the line: its rules would reach
 * BIRD and judge addresses, and a guess at them could do either wrongly.
 */
export async function readFilter(files: RegistryFiles): Promise<Dn42Filter> {
  const read = async (family: Family): Promise<Dn42FilterRule[]> => {
    const text = await files.read(FILTER_FILES[family]);
    if (text === undefined) return BUILTIN_FILTER[family];
    try {
      return parseFilter(text, family);
    } catch (err) {
      throw problem('registry.filterUnreadable', { reason: (err as Error).message });
    }
  };
  return { ipv4: await read('ipv4'), ipv6: await read('ipv6') };
}

/**
 * The route objects covering `address`, least specific first, each with its deciding filter line. File
 * names (`fd42:1234::_48`) pick the candidates; each is then read, and counts only where its own
 * `route`/`route6:` covers the address (the file name is not trusted).
 */
export async function routesCovering(
  files: RegistryFiles,
  filter: Dn42Filter,
  address: string,
): Promise<RouteObject[]> {
  const family = isIpv4(address) ? 'ipv4' : 'ipv6';
  const type = family === 'ipv4' ? 'route' : 'route6';
  const out: RouteObject[] = [];
  // in name order, so that objects merged below list their origins alike from a checkout and a mirror
  for (const file of (await files.list(`data/${type}`)).sort()) {
    const cut = file.lastIndexOf('_');
    const named = `${file.slice(0, cut)}/${file.slice(cut + 1)}`;
    if (cut < 0 || !parsePrefix(named, family) || !inRanges(address, [named])) continue;
    const text = await files.read(`data/${type}/${file}`);
    if (text === undefined) continue;
    const attrs = parseRpsl(text);
    const written = values(attrs, type).map(nameValue)[0] ?? '';
    if (!parsePrefix(written, family) || !inRanges(address, [written])) continue;
    const prefix = canonicalPrefix(written);
    const origins = values(attrs, 'origin')
      .map((v) => /^AS([0-9]{1,10})$/i.exec(nameValue(v))?.[1])
      .filter((n): n is string => n !== undefined)
      .map(Number);
    // two files naming one prefix (only a file's own line is trusted) make one object of both origins
    const same = out.find((o) => o.prefix === prefix);
    if (same) same.origins = [...new Set([...same.origins, ...origins])];
    else
      out.push({ type, prefix, origins: [...new Set(origins)], rule: filterRuleFor(filter[family], prefix) });
  }
  const length = (o: RouteObject) => parsePrefix(o.prefix)?.length ?? 0;
  return out.sort((a, b) => length(a) - length(b) || a.prefix.localeCompare(b.prefix));
}

/** The object an address belongs to: the most specific covering one the filter permits. */
export function holder(objects: readonly RouteObject[]): RouteObject | undefined {
  return objects.filter(permitted).at(-1);
}

const asns = (o: RouteObject) => o.origins.map((n) => `AS${n}`).join(', ') || 'no origin';

/** `route6 fd42::/48 (AS1)`, with why it does not count when the filter denies it. */
function described(o: RouteObject): string {
  if (permitted(o)) return `${o.type} ${o.prefix} (${asns(o)})`;
  const file = o.type === 'route' ? 'filter.txt' : 'filter6.txt';
  const why = o.rule
    ? `denied by line ${String(o.rule.nr).padStart(4, '0')} of the registry's ${file}`
    : `matched by no line of the registry's ${file}`;
  return `${o.type} ${o.prefix} (${asns(o)}, ${why}, does not count)`;
}

/**
 * Why `asn` may not use `address` as a tunnel address by these route objects, or undefined when it may:
 * the holder (the most specific object the filter permits) must have `asn` as its only origin. An
 * anycast object (several origins) gives no one its addresses: every origin announces them, so the
 * router would send traffic for a shared service into one peer's tunnel.
 */
export function ownershipProblem(
  objects: readonly RouteObject[],
  asn: number,
  address: string,
): FieldSaid | undefined {
  const owner = holder(objects);
  const type = isIpv4(address) ? 'route' : 'route6';
  if (owner && owner.origins.length === 1 && owner.origins[0] === asn) return undefined;
  const object = owner && { address, type: owner.type, prefix: owner.prefix };
  if (object && owner.origins.length > 1)
    return { key: 'field.routeAnycast', params: { ...object, origins: asns(owner) } };
  if (object && owner.origins.length === 0) return { key: 'field.routeNoOrigin', params: object };
  if (object) {
    const own = objects.find((o) => permitted(o) && o.origins.includes(asn));
    const holderAsn = owner.origins[0] ?? 0;
    return own
      ? {
          key: 'field.routeOfOtherOverOwn',
          params: { ...object, holder: holderAsn, ownType: own.type, ownPrefix: own.prefix },
        }
      : { key: 'field.routeOfOther', params: { ...object, holder: holderAsn } };
  }
  return objects.length > 0
    ? {
        key: 'field.routeNoneCounts',
        params: { type, address, asn, objects: objects.map(described).join('; ') },
      }
    : { key: 'field.routeNone', params: { type, address, asn } };
}

/**
 * Where the registry has route objects: each peer address of a session (`ipv6`, `ipv4`) must be the
 * session's ASN's by ownershipProblem, as DN42 requires of anything announced; one it lacks (an adopted
 * session without ipv6) needs no route. Pointers as in a create body. A users file (no `files`) checks
 * nothing.
 */
export async function routeObjectErrors(
  registry: RouteSource,
  asn: number,
  spec: { ipv6?: string | undefined; ipv4?: string | undefined },
): Promise<FieldError[]> {
  if (!registry.files) return [];
  const files = await registry.files();
  const filter = await readFilter(files);
  const errors: FieldError[] = [];
  for (const field of ['ipv6', 'ipv4'] as const) {
    const address = spec[field];
    if (address === undefined) continue;
    const problem = ownershipProblem(await routesCovering(files, filter, address), asn, address);
    if (problem !== undefined) errors.push(fieldError(`/${field}`, problem.key, problem.params));
  }
  return errors;
}

/**
 * Approve and enable queue a session for setup: its addresses must still be its ASN's now, since the
 * registry may have changed after the request (a route object removed, a more specific one of another
 * network added, the filter changed). INVALID_STATE (409), naming the field and what the registry says.
 */
export async function assertRoutesStillHold(
  registry: RouteSource,
  session: { name: string; spec: { asn: number; ipv6?: string | undefined; ipv4?: string | undefined } },
  action: string,
): Promise<void> {
  const errors = await routeObjectErrors(registry, session.spec.asn, session.spec);
  if (errors.length > 0)
    throw problem(
      'session.registryMoved',
      { action, name: session.name, asn: session.spec.asn, ...fieldAtFault(errors) },
      errors,
    );
}
