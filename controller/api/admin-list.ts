/**
 * The admin list's search, filters, order and pages over the stored sessions (docs/api.md, Admin API,
 * list): the controller picks the page, so that a client of 10,000 sessions gets the 50 it shows
 * (docs/decisions.md, Portal). Records are built for the page only.
 */
import type { Router, Session } from '../store/store.ts';
import type { ListSortKey } from './responses.ts';

export interface ListQuery {
  /** An ASN prefix (`4242421`, `AS4242421`), or words found in names, addresses, endpoint and uuid. */
  search?: string | undefined;
  status?: number | undefined;
  sort?: ListSortKey | undefined;
  descending?: boolean | undefined;
  offset?: number | undefined;
  /** Undefined: every session the filters keep (the CLI's list). */
  limit?: number | undefined;
}

const ASN_PREFIX = /^(?:as)?([0-9]{1,10})$/i;

/** The lower-case text a word search looks in. */
function haystack(s: Session, router: Router | undefined): string {
  const { spec } = s;
  const parts = [router?.spec.displayName, spec.router, spec.ipv6, spec.ipv4, spec.linkLocal, spec.endpoint];
  return [...parts, spec.uuid].filter(Boolean).join(' ').toLowerCase();
}

type Compare = (a: Session, b: Session) => number;

function comparators(routerName: (s: Session) => string): Record<ListSortKey, Compare> {
  return {
    asn: (a, b) => a.spec.asn - b.spec.asn,
    status: (a, b) => a.status.code - b.status.code,
    router: (a, b) => routerName(a).localeCompare(routerName(b)),
    bgp: (a, b) => (a.status.bgpState ?? '').localeCompare(b.status.bgpState ?? ''),
    // oldest first when ascending; a session without a time sorts last
    age: (a, b) => (a.spec.createdAt ?? '\uffff').localeCompare(b.spec.createdAt ?? '\uffff'),
  };
}

/**
 * The sessions `q` keeps, in its order, and the page asked for; `matched` counts all it keeps. Ties go
 * by ASN then uuid: one order across requests, so offsets page through without gaps or repeats while
 * nothing changes.
 */
export function listPage(
  sessions: readonly Session[],
  routerOf: (name: string) => Router | undefined,
  q: ListQuery,
): { page: Session[]; matched: number } {
  const words = (q.search ?? '').trim().toLowerCase();
  const asn = ASN_PREFIX.exec(words)?.[1];
  const kept = sessions.filter(
    (s) =>
      (q.status === undefined || s.status.code === q.status) &&
      (words === '' ||
        (asn !== undefined
          ? String(s.spec.asn).startsWith(asn)
          : haystack(s, routerOf(s.spec.router)).includes(words))),
  );
  const by = q.sort
    ? comparators((s) => routerOf(s.spec.router)?.spec.displayName ?? s.spec.router)[q.sort]
    : // no sort asked: by name (as<asn>-<router>), the list's order before pages existed
      (a: Session, b: Session) => a.name.localeCompare(b.name);
  const sign = q.descending ? -1 : 1;
  kept.sort((a, b) => sign * by(a, b) || a.spec.asn - b.spec.asn || a.spec.uuid.localeCompare(b.spec.uuid));
  const from = q.offset ?? 0;
  const page = q.limit === undefined ? kept.slice(from) : kept.slice(from, from + q.limit);
  return { page, matched: kept.length };
}
