/**
 * What the DN42 registry says about a session under review (docs/api.md, Admin API, review): its ASN's
 * aut-num (as-name, mnt-by, admin-c and tech-c) and, per peer address, the route objects covering it
 * and whether they give it to the session's ASN (routes.ts decides, as create and approve do).
 */
import { nameValue, parseRpsl, values } from '../auth/login/rpsl.ts';
import {
  ownershipProblem,
  permitted,
  readFilter,
  routesCovering,
  type RegistryFiles,
  type RouteSource,
} from './routes.ts';
import { saidText } from '../../common/messages.ts';

export interface AutNumSummary {
  asName: string | null;
  mntBy: string[];
  adminC: string[];
  techC: string[];
}

export interface AddressReview {
  field: 'ipv6' | 'ipv4';
  address: string;
  /** Least specific first; `counts` is false where the registry's filter denies the object. */
  objects: { type: 'route' | 'route6'; prefix: string; origins: number[]; counts: boolean }[];
  /** Why the address is not the ASN's, as approve would refuse it; null when it is. */
  problem: string | null;
}

export interface RegistryReview extends AutNumSummary {
  /** False when the registry has no aut-num for the ASN. */
  found: boolean;
  addresses: AddressReview[];
}

/** The aut-num of `asn`, or undefined when the registry has none. */
async function autNum(files: RegistryFiles, asn: number): Promise<AutNumSummary | undefined> {
  const text = await files.read(`data/aut-num/AS${asn}`);
  if (text === undefined) return undefined;
  const attrs = parseRpsl(text);
  const names = (key: string) => values(attrs, key).map(nameValue).filter(Boolean);
  return {
    asName: names('as-name')[0] ?? null,
    mntBy: names('mnt-by'),
    adminC: names('admin-c'),
    techC: names('tech-c'),
  };
}

/** The as-name of each ASN (null where the registry has no aut-num or no as-name). */
export async function asNames(
  registry: RouteSource,
  asns: readonly number[],
): Promise<Map<number, string | null>> {
  const out = new Map<number, string | null>();
  if (!registry.files) return out;
  const files = await registry.files();
  for (const asn of new Set(asns)) out.set(asn, (await autNum(files, asn))?.asName ?? null);
  return out;
}

/** The registry's view of a session; undefined for a source without registry files (a users file). */
export async function registryReview(
  registry: RouteSource,
  session: { asn: number; ipv6?: string | undefined; ipv4?: string | undefined },
): Promise<RegistryReview | undefined> {
  if (!registry.files) return undefined;
  const files = await registry.files();
  const filter = await readFilter(files);
  const addresses: AddressReview[] = [];
  for (const field of ['ipv6', 'ipv4'] as const) {
    const address = session[field];
    if (address === undefined) continue;
    const objects = await routesCovering(files, filter, address);
    const said = ownershipProblem(objects, session.asn, address);
    addresses.push({
      field,
      address,
      objects: objects.map((o) => ({
        type: o.type,
        prefix: o.prefix,
        origins: o.origins,
        counts: permitted(o),
      })),
      problem: said === undefined ? null : saidText(said),
    });
  }
  const aut = await autNum(files, session.asn);
  return {
    found: aut !== undefined,
    ...(aut ?? { asName: null, mntBy: [], adminC: [], techC: [] }),
    addresses,
  };
}
