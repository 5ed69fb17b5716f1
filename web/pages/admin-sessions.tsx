/**
 * The admin's table of every session (docs/user-guide.md, The admin table): search, filters, sort and
 * pages done by the controller, one page of the admin list asked at a time (docs/api.md, Admin API,
 * list), and one action with one reason on the rows picked, sent one session at a time so each row tells
 * its own result (docs/decisions.md, Portal).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { SessionStatus } from '../../common/status.ts';
import {
  api,
  ApiError,
  type AdminAction,
  type AdminListQuery,
  type AdminSessionRecord,
  type ListSortKey,
  type SessionRecord,
} from '../api.ts';
import { Pager, Problem, StatusBadge } from '../components.tsx';
import { ago } from '../format.ts';
import { t, type MessageKey } from '../i18n/index.ts';
import { localText } from '../i18n/problems/index.ts';

const PAGE_SIZE = 50;

/** What the admin chose: the page is asked of the controller with these. */
type TableQuery = Omit<AdminListQuery, 'offset' | 'limit' | 'search'> & { search: string };

/** One page of the list as the controller answered it. */
interface TablePage {
  sessions: AdminSessionRecord[];
  matched: number;
  total: number;
}

const COLUMNS: { key: ListSortKey | undefined; label: MessageKey }[] = [
  { key: 'status', label: 'table.status' },
  { key: 'asn', label: 'table.asn' },
  { key: 'router', label: 'table.router' },
  { key: undefined, label: 'table.addresses' },
  { key: 'bgp', label: 'table.bgp' },
  { key: undefined, label: 'table.lastError' },
  { key: 'age', label: 'table.age' },
];

/** The admin actions in the order offered; a reason where the owner reads one (docs/api.md, Decisions). */
export const ADMIN_ACTIONS: { action: AdminAction; label: MessageKey; needsReason: boolean }[] = [
  { action: 'approve', label: 'reviews.approve', needsReason: false },
  { action: 'reject', label: 'reviews.reject', needsReason: true },
  { action: 'disable', label: 'review.disable', needsReason: true },
  { action: 'enable', label: 'review.enable', needsReason: false },
  { action: 'purge', label: 'review.purge', needsReason: true },
];

/** A row's outcome of the last bulk action: done, or the controller's refusal. */
type RowResult = { ok: true } | { ok: false; message: string };

export function AdminSessionsPage() {
  const [data, setData] = useState<TablePage>();
  const [error, setError] = useState<unknown>();
  const [asNames, setAsNames] = useState<ReadonlyMap<number, string | null>>(new Map());
  const [routers, setRouters] = useState<[string, string][]>([]);
  const [q, setQ] = useState<TableQuery>({ search: '', sort: 'asn', descending: false });
  const [page, setPage] = useState(0);
  // answers can arrive out of order while the admin types: only the last request's shows
  const asked = useRef(0);
  const [picked, setPicked] = useState<ReadonlySet<string>>(new Set());
  const [reason, setReason] = useState('');
  const [reasonError, setReasonError] = useState(false);
  const [progress, setProgress] = useState<{ done: number; of: number; action: AdminAction }>();
  const [results, setResults] = useState<ReadonlyMap<string, RowResult>>(new Map());

  const load = async () => {
    const n = ++asked.current;
    const { search, ...rest } = q;
    try {
      const answer = await api.adminSessionPage({
        ...rest,
        ...(search.trim() ? { search: search.trim() } : {}),
        offset: page * PAGE_SIZE,
        limit: PAGE_SIZE,
      });
      if (n !== asked.current) return;
      setData(answer);
      setError(undefined);
    } catch (err) {
      if (n === asked.current) setError(err);
    }
  };
  useEffect(() => {
    void load();
  }, [q, page]);
  // the router filter's choices: every router, not only those of the page shown
  useEffect(() => {
    api
      .adminRouters()
      .then((r) => setRouters(r.routers.map((x) => [x.name, x.spec.displayName])))
      .catch(() => undefined); // the filter then offers All alone; the table's own errors show
  }, []);

  const sessions = data?.sessions;
  const matched = data?.matched ?? 0;
  const pages = Math.max(1, Math.ceil(matched / PAGE_SIZE));
  const at = Math.min(page, pages - 1);
  const shown: SessionRecord[] = sessions ?? [];

  // the registry's as-names of the page shown, asked once per ASN (docs/api.md, Admin API, as-names)
  const missing = [...new Set(shown.map((s) => s.asn))].filter((asn) => !asNames.has(asn));
  useEffect(() => {
    if (missing.length === 0) return;
    api
      .asNames(missing)
      .then((r) =>
        setAsNames((old) => new Map([...old, ...r.asNames.map((n) => [n.asn, n.asName] as const)])),
      )
      .catch(() => undefined); // the column then shows the ASN alone
  }, [missing.join()]);

  const refine = (next: TableQuery) => {
    setQ(next);
    setPage(0);
  };
  const change = (patch: Partial<TableQuery>) => refine({ ...q, ...patch });
  // a bulk action or another admin emptied the last page: show the one now last
  useEffect(() => {
    if (data && data.sessions.length === 0 && page > 0 && data.matched > 0) setPage(pages - 1);
  }, [data]);
  const sortBy = (key: ListSortKey) => change({ sort: key, descending: q.sort === key && !q.descending });
  const toggle = (uuid: string, on: boolean) => {
    const next = new Set(picked);
    if (on) next.add(uuid);
    else next.delete(uuid);
    setPicked(next);
  };
  const pageAllPicked = shown.length > 0 && shown.every((s) => picked.has(s.uuid));
  const pickPage = (on: boolean) => {
    const next = new Set(picked);
    for (const s of shown)
      if (on) next.add(s.uuid);
      else next.delete(s.uuid);
    setPicked(next);
  };

  const run = async (action: AdminAction, needsReason: boolean) => {
    if (needsReason && !reason.trim()) {
      setReasonError(true);
      document.getElementById('bulk-reason')?.focus();
      return;
    }
    setReasonError(false);
    const uuids = [...picked];
    const outcome = new Map<string, RowResult>();
    setResults(outcome);
    // one at a time: each answer is the row's own, and the controller's rate limit is not raced
    for (const [i, uuid] of uuids.entries()) {
      setProgress({ done: i, of: uuids.length, action });
      try {
        await api.adminSession(action, uuid, reason.trim());
        outcome.set(uuid, { ok: true });
      } catch (err) {
        outcome.set(uuid, { ok: false, message: err instanceof ApiError ? err.text() : String(err) });
      }
      setResults(new Map(outcome));
    }
    setProgress({ done: uuids.length, of: uuids.length, action });
    setPicked(new Set([...outcome].filter(([, r]) => !r.ok).map(([uuid]) => uuid)));
    await load();
  };
  const failed = [...results.values()].filter((r) => !r.ok).length;
  const busy = progress !== undefined && progress.done < progress.of;

  return (
    <section aria-labelledby="table-title">
      <h1 id="table-title">{t('table.title')}</h1>
      <Problem error={error} />
      {data === undefined && !error && <p>{t('common.loading')}</p>}
      {data && (
        <>
          <form class="table-filters" role="search" onSubmit={(e) => e.preventDefault()}>
            <div class="field">
              <label for="table-search">{t('table.search')}</label>
              <input
                id="table-search"
                type="search"
                value={q.search}
                aria-describedby="table-search-hint"
                onInput={(e) => change({ search: e.currentTarget.value })}
              />
              <p class="hint" id="table-search-hint">
                {t('table.searchHint')}
              </p>
            </div>
            <div class="field">
              <label for="table-status">{t('table.status')}</label>
              <select
                id="table-status"
                value={q.status ?? ''}
                onChange={(e) => {
                  const { status: _status, ...rest } = q;
                  const v = e.currentTarget.value;
                  refine(v === '' ? rest : { ...rest, status: Number(v) });
                }}
              >
                <option value="">{t('table.all')}</option>
                {Object.entries(SessionStatus).map(([name, code]) => (
                  <option key={code} value={code}>
                    {name}
                  </option>
                ))}
              </select>
            </div>
            <div class="field">
              <label for="table-router">{t('table.router')}</label>
              <select
                id="table-router"
                value={q.router ?? ''}
                onChange={(e) => {
                  const { router: _router, ...rest } = q;
                  const v = e.currentTarget.value;
                  refine(v ? { ...rest, router: v } : rest);
                }}
              >
                <option value="">{t('table.all')}</option>
                {routers.map(([name, display]) => (
                  <option key={name} value={name}>
                    {display} ({name})
                  </option>
                ))}
              </select>
            </div>
          </form>

          <p role="status" data-testid="table-count">
            {matched === 0
              ? t('table.noMatch')
              : t('table.showing', {
                  from: at * PAGE_SIZE + 1,
                  to: at * PAGE_SIZE + shown.length,
                  n: matched,
                  total: data.total,
                })}
          </p>

          <fieldset class="bulk">
            <legend>{t('table.bulk', { n: picked.size })}</legend>
            <div class={`field${reasonError ? ' has-error' : ''}`}>
              <label for="bulk-reason">{t('reviews.reason')}</label>
              <input
                id="bulk-reason"
                value={reason}
                maxLength={500}
                aria-describedby={reasonError ? 'bulk-reason-hint bulk-reason-error' : 'bulk-reason-hint'}
                aria-invalid={reasonError || undefined}
                onInput={(e) => setReason(e.currentTarget.value)}
              />
              <p class="hint" id="bulk-reason-hint">
                {t('table.reasonHint')}
              </p>
              {reasonError && (
                <p class="field-error" id="bulk-reason-error" role="alert">
                  {t('table.reasonNeeded')}
                </p>
              )}
            </div>
            <div class="buttons">
              {ADMIN_ACTIONS.map((a) => (
                <button
                  key={a.action}
                  type="button"
                  class={a.needsReason ? 'danger' : undefined}
                  disabled={picked.size === 0 || busy}
                  onClick={() => run(a.action, a.needsReason)}
                >
                  {t(a.label)}
                </button>
              ))}
            </div>
            <p role="status" data-testid="bulk-progress">
              {progress &&
                (busy
                  ? t('table.progress', { done: progress.done, of: progress.of })
                  : t('table.finished', { of: progress.of, failed }))}
            </p>
          </fieldset>

          {shown.length > 0 && (
            <div class="table-wrap" role="region" aria-labelledby="table-title" tabIndex={0}>
              <table class="sessions-table">
                <thead>
                  <tr>
                    <th scope="col">
                      <input
                        type="checkbox"
                        aria-label={t('table.pickPage')}
                        checked={pageAllPicked}
                        onChange={(e) => pickPage(e.currentTarget.checked)}
                      />
                    </th>
                    {COLUMNS.map((c) => (
                      <th
                        key={c.label}
                        scope="col"
                        aria-sort={
                          c.key && q.sort === c.key ? (q.descending ? 'descending' : 'ascending') : undefined
                        }
                      >
                        {c.key ? (
                          <button type="button" class="sort" onClick={() => sortBy(c.key as ListSortKey)}>
                            {t(c.label)}
                            <span aria-hidden="true">
                              {q.sort === c.key ? (q.descending ? ' ▼' : ' ▲') : ''}
                            </span>
                          </button>
                        ) : (
                          t(c.label)
                        )}
                      </th>
                    ))}
                    <th scope="col">{t('table.result')}</th>
                  </tr>
                </thead>
                <tbody>
                  {shown.map((s) => (
                    <Row
                      key={s.uuid}
                      session={s}
                      asName={asNames.get(s.asn)}
                      picked={picked.has(s.uuid)}
                      onPick={(on) => toggle(s.uuid, on)}
                      result={results.get(s.uuid)}
                    />
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <Pager at={at} pages={pages} onPage={setPage} />
        </>
      )}
    </section>
  );
}

function Row(props: {
  session: SessionRecord;
  asName: string | null | undefined;
  picked: boolean;
  onPick: (on: boolean) => void;
  result: RowResult | undefined;
}) {
  const s = props.session;
  return (
    <tr data-uuid={s.uuid}>
      <td>
        <input
          type="checkbox"
          aria-label={t('table.pick', { asn: s.asn, router: s.routerName })}
          checked={props.picked}
          onChange={(e) => props.onPick(e.currentTarget.checked)}
        />
      </td>
      <td>
        <StatusBadge code={s.status} name={s.statusName} />
      </td>
      <td>
        <a href={`#/admin/review/${s.uuid}`}>AS{s.asn}</a>
        {props.asName && <div class="muted">{props.asName}</div>}
        {s.adopted && (
          <div class="muted" title={s.adopted.files.join(', ')}>
            {t('adopted.mark')}
          </div>
        )}
      </td>
      <td>{s.routerName}</td>
      <td>
        {/* an adopted session may have no DN42 IPv6: its link-local is what it peers over */}
        <code>{s.ipv6 || s.ipv6LinkLocal}</code>
        {s.ipv4 && (
          <>
            <br />
            <code>{s.ipv4}</code>
          </>
        )}
      </td>
      <td>
        {s.bgpState ?? '–'}
        {s.bgpSince && <div class="muted">{ago(s.bgpSince)}</div>}
      </td>
      <td class="table-error">{s.lastError ? localText(s.lastError) : ''}</td>
      <td>{ago(s.createdAt)}</td>
      <td>
        {props.result &&
          (props.result.ok ? (
            <span class="ok-text">{t('table.done')}</span>
          ) : (
            <span class="field-error">{props.result.message}</span>
          ))}
      </td>
    </tr>
  );
}
