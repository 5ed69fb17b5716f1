/**
 * The sessions waiting for review (docs/api.md, Admin API); the routers, the policy and the tokens have
 * pages of their own (routers.tsx, policy.tsx, tokens.tsx).
 */
import { useEffect, useState } from 'preact/hooks';
import { SessionStatus } from '../../common/status.ts';
import { api, watchSessions, type AdminSessionRecord } from '../api.ts';
import { described, Dl, Field, Problem } from '../components.tsx';
import { dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { localText } from '../i18n/problems/index.ts';

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

export function ReviewsPage() {
  const [data, error, reload] = useLoad(() => api.adminSessions({ status: SessionStatus.PENDING_REVIEW }));
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
  }, []);
  return (
    <section aria-labelledby="reviews-title">
      <h1 id="reviews-title">{t('reviews.title')}</h1>
      <Problem error={error} />
      {data === undefined && !error && <p>{t('common.loading')}</p>}
      {data?.sessions.length === 0 && <p>{t('reviews.none')}</p>}
      {data?.sessions.map((s) => (
        <Review key={s.uuid} session={s} onDone={reload} />
      ))}
    </section>
  );
}

function Review(props: { session: AdminSessionRecord; onDone: () => void }) {
  const s = props.session;
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>();
  const [needReason, setNeedReason] = useState(false);
  const violations = s.policyViolations;
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
      <Dl
        items={[
          [t('session.ipv6'), <code>{s.ipv6}</code>],
          [t('session.ipv4'), s.ipv4 ? <code>{s.ipv4}</code> : t('session.none')],
          [t('session.linkLocal'), <code>{s.ipv6LinkLocal}</code>],
          [t('reviews.endpoint'), s.endpoint ? <code>{s.endpoint}</code> : t('session.noEndpoint')],
          [t('session.publicKey'), <code class="wrap">{s.publicKey}</code>],
          [t('session.mtu'), String(s.mtu)],
          [
            t('session.bgp'),
            [s.mpbgp ? 'MP-BGP' : t('session.noMpbgp'), s.extendedNextHop ? t('session.enh') : '']
              .filter(Boolean)
              .join(', '),
          ],
          [t('session.port'), `${s.listenPort} (${s.interface})`],
        ]}
      />
      <div class={violations.length ? 'checks-failed' : 'checks-passed'}>
        <h3>{t('reviews.checks')}</h3>
        {violations.length === 0 ? (
          <p>{t('reviews.checksPassed')}</p>
        ) : (
          <ul>
            {violations.map((v) => (
              <li key={v.pointer + v.message}>
                <code>{v.pointer}</code> {localText(v)}
              </li>
            ))}
          </ul>
        )}
      </div>
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
