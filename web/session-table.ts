/**
 * The admin table's search, filters, sort and pages, done in the browser over the whole admin list
 * (docs/decisions.md, Portal: 10,000 sessions filter in a few ms here, so the API needs no paging).
 */
import type { SessionRecord } from './api.ts';

export type SortKey = 'asn' | 'status' | 'router' | 'bgp' | 'age';

export interface TableQuery {
  /** An ASN prefix (`4242421`, `AS4242421`), or words found in the names and addresses. */
  search: string;
  /** Status code, or undefined for all. */
  status: number | undefined;
  router: string | undefined;
  sort: SortKey;
  descending: boolean;
}

export const PAGE_SIZE = 50;

/** The lower-case text a word search looks in: names and addresses, computed once per list. */
export function haystack(s: SessionRecord, asName: string | null | undefined): string {
  const parts = [s.routerName, s.router, s.ipv6, s.ipv4, s.ipv6LinkLocal, s.endpoint, asName, s.uuid];
  return parts.filter(Boolean).join(' ').toLowerCase();
}

const ASN_PREFIX = /^(?:as)?([0-9]{1,10})$/i;

const compare: Record<SortKey, (a: SessionRecord, b: SessionRecord) => number> = {
  asn: (a, b) => a.asn - b.asn,
  status: (a, b) => a.status - b.status,
  router: (a, b) => a.routerName.localeCompare(b.routerName),
  bgp: (a, b) => (a.bgpState ?? '').localeCompare(b.bgpState ?? ''),
  // oldest first when ascending; a session without a time sorts last
  age: (a, b) => (a.createdAt ?? '\uffff').localeCompare(b.createdAt ?? '\uffff'),
};

/** The sessions the query keeps, in its order. `hay` holds haystack() of each, by uuid. */
export function query(
  sessions: readonly SessionRecord[],
  hay: ReadonlyMap<string, string>,
  q: TableQuery,
): SessionRecord[] {
  const words = q.search.trim().toLowerCase();
  const asn = ASN_PREFIX.exec(words)?.[1];
  const kept = sessions.filter(
    (s) =>
      (q.status === undefined || s.status === q.status) &&
      (q.router === undefined || s.router === q.router) &&
      (words === '' ||
        (asn !== undefined ? String(s.asn).startsWith(asn) : (hay.get(s.uuid) ?? '').includes(words))),
  );
  const by = compare[q.sort];
  // ties by ASN then uuid: the order is stable across reloads of the list
  return kept.sort(
    (a, b) => (q.descending ? -1 : 1) * by(a, b) || a.asn - b.asn || a.uuid.localeCompare(b.uuid),
  );
}
