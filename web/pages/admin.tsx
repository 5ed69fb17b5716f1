/**
 * The sessions waiting for review (docs/api.md, Admin API); the routers, the policy and the tokens have
 * pages of their own (routers.tsx, policy.tsx, tokens.tsx).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { SessionStatus } from '../../common/status.ts';
import { api, watchSessions, type AdminSessionListResponse, type AdminSessionRecord } from '../api.ts';
import { described, Dl, Field, Pager, Problem } from '../components.tsx';
import { dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { AdoptedNotice, ModifiedNotice, PolicyChecks, reviewedRows } from './reviewed-values.tsx';

/** Loads once on mount; the page reloads after a change. */
export function useLoad<T>(load: () => Promise<T>): [T | undefined, unknown, () => Promise<void>] {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<unknown>();
  const reload = async () => {
    try {
      setData(await load());
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void reload();
  }, []);
  return [data, error, reload];
}

/** Review cards are tall: fewer to a page than the admin table's rows. */
const REVIEWS_PER_PAGE = 20;

export function ReviewsPage() {
  const [page, setPage] = useState(0);
  // the answer with the offset it was asked at: the count names the page shown, not the one asked
  const [data, setData] = useState<Required<AdminSessionListResponse> & { offset: number }>();
  const [error, setError] = useState<unknown>();
  // answers can arrive out of order (a page turned while the stream asks again): only the last shows
  const asked = useRef(0);
  const reload = async () => {
    const n = ++asked.current;
    try {
      // the oldest request first, one page asked of the controller as the admin table does
      const offset = page * REVIEWS_PER_PAGE;
      const answer = await api.adminSessionPage({
        status: SessionStatus.PENDING_REVIEW,
        sort: 'age',
        descending: false,
        offset,
        limit: REVIEWS_PER_PAGE,
      });
      if (n !== asked.current) return;
      setData({ ...answer, offset });
      setError(undefined);
    } catch (err) {
      if (n === asked.current) setError(err);
    }
  };
  useEffect(() => {
    void reload();
  }, [page]);
  const pages = Math.max(1, Math.ceil((data?.matched ?? 0) / REVIEWS_PER_PAGE));
  const at = Math.min(page, pages - 1);
  // decisions emptied the last page: show the one now last
  useEffect(() => {
    if (data && data.sessions.length === 0 && page > 0 && data.matched > 0) setPage(pages - 1);
  }, [data]);
  // Asked again when the sessions in review change (a new request, another admin's decision), as the
  // controller's stream of the list tells (docs/api.md, Live updates); the admin list carries what the
  // stream's does not (the policy's objections).
  useEffect(() => {
    const stop = new AbortController();
    // the first list too: a request made between the page's load and the stream's start shows
    let inReview: string | undefined;
    watchSessions((list) => {
      const now = list
        .filter((s) => s.status === SessionStatus.PENDING_REVIEW)
        .map((s) => s.uuid)
        .join();
      if (now !== inReview) void reload();
      inReview = now;
    }, stop.signal).catch(() => undefined); // the page's own list still shows, and its errors
    return () => stop.abort();
  }, [page]);
  return (
    <section aria-labelledby="reviews-title">
      <h1 id="reviews-title">{t('reviews.title')}</h1>
      <Problem error={error} />
      {data === undefined && !error && <p>{t('common.loading')}</p>}
      {data?.matched === 0 && <p>{t('reviews.none')}</p>}
      {data && data.matched > REVIEWS_PER_PAGE && (
        <p class="muted" aria-live="polite">
          {t('reviews.showing', {
            from: data.offset + 1,
            to: data.offset + data.sessions.length,
            n: data.matched,
          })}
        </p>
      )}
      {data?.sessions.map((s) => (
        <Review key={s.uuid} session={s} onDone={reload} />
      ))}
      <Pager at={at} pages={pages} onPage={setPage} />
    </section>
  );
}

function Review(props: { session: AdminSessionRecord; onDone: () => void }) {
  const s = props.session;
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>();
  const [needReason, setNeedReason] = useState(false);
  const id = `reason-${s.uuid}`;
  const reasonError = needReason && !reason.trim() ? t('reviews.reasonNeeded') : undefined;
  const act = async (action: 'approve' | 'reject') => {
    setError(undefined);
    if (action === 'reject' && !reason.trim()) {
      setNeedReason(true);
      return;
    }
    try {
      await api.adminSession(action, s.uuid, reason.trim());
      props.onDone();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <article class="card" aria-labelledby={`r-${s.uuid}`} data-uuid={s.uuid}>
      <header>
        <h2 id={`r-${s.uuid}`}>
          AS{s.asn} → {s.routerName}
        </h2>
        <span class="muted">{dateTime(s.createdAt)}</span>
      </header>
      <ModifiedNotice session={s} />
      <AdoptedNotice session={s} />
      <Dl items={[...reviewedRows(s), [t('session.port'), `${s.listenPort} (${s.interface})`]]} />
      <PolicyChecks violations={s.policyViolations}>
        <h3>{t('reviews.checks')}</h3>
      </PolicyChecks>
      <Field id={id} label={t('reviews.reason')} hint={t('reviews.reasonHint')} error={reasonError}>
        <input
          {...described(id, true, reasonError)}
          value={reason}
          maxLength={500}
          onInput={(e) => setReason(e.currentTarget.value)}
        />
      </Field>
      <div class="buttons">
        <button type="button" onClick={() => act('approve')}>
          {t('reviews.approve')}
        </button>
        <button type="button" class="danger" onClick={() => act('reject')}>
          {t('reviews.reject')}
        </button>
      </div>
      <Problem error={error} />
    </article>
  );
}
