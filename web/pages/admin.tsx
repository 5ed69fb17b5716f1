/** The admin's pages: sessions waiting for review, the routers, the policy (docs/api.md, Admin API). */
import { useEffect, useState } from 'preact/hooks';
import { isHealthy } from '../../common/conditions.ts';
import { SessionStatus } from '../../common/status.ts';
import {
  api,
  watchSessions,
  type AdminRouterRecord,
  type AdminSessionRecord,
  type Condition,
  type SessionRecord,
} from '../api.ts';
import { described, Dl, Field, Problem } from '../components.tsx';
import { ago, dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { localText } from '../i18n/problems/index.ts';
import { statusWords } from './advice.ts';

function useLoad<T>(load: () => Promise<T>): [T | undefined, unknown, () => Promise<void>] {
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
                <code>{v.pointer}</code> {v.message}
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

export function RoutersPage() {
  const [data, error, reload] = useLoad(async () => {
    const [routers, sessions] = await Promise.all([api.adminRouters(), api.adminSessions()]);
    return { routers: routers.routers, sessions: sessions.sessions };
  });
  return (
    <section aria-labelledby="routers-title">
      <h1 id="routers-title">{t('routers.title')}</h1>
      <Problem error={error} />
      {data === undefined && !error && <p>{t('common.loading')}</p>}
      {data?.routers.length === 0 && <p>{t('routers.none')}</p>}
      {data?.routers.map((r) => (
        <RouterCard
          key={r.name}
          router={r}
          sessions={data.sessions.filter((s) => s.router === r.name)}
          onChanged={reload}
        />
      ))}
    </section>
  );
}

function conditionsOf(r: AdminRouterRecord): Condition[] {
  return r.status.conditions ?? [];
}

/** Closes a router to new sessions or opens it again (`acceptingSessions`; its sessions stay as they are). */
function RouterSwitch(props: { router: AdminRouterRecord; onChanged: () => Promise<void> }) {
  const [error, setError] = useState<unknown>();
  const open = props.router.spec.acceptingSessions !== false;
  const flip = async () => {
    setError(undefined);
    try {
      await api.updateRouter(props.router.name, { acceptingSessions: !open });
      await props.onChanged();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <div class="buttons">
        <button type="button" class="secondary" onClick={flip}>
          {open ? t('routers.stopAccepting') : t('routers.startAccepting')}
        </button>
      </div>
      <Problem error={error} />
    </>
  );
}

function RouterCard(props: {
  router: AdminRouterRecord;
  sessions: SessionRecord[];
  onChanged: () => Promise<void>;
}) {
  const r = props.router;
  const byStatus = new Map<number, number>();
  for (const s of props.sessions) byStatus.set(s.status, (byStatus.get(s.status) ?? 0) + 1);
  const conditions = conditionsOf(r);
  const heartbeat = r.status.lastHeartbeat;
  // the badge says what Ready says: the controller takes it back from a silent agent or a BIRD that is
  // down (docs/kubernetes.md, Conditions); no Ready: the agent never reported
  const ready = conditions.find((c) => c.type === 'Ready');
  const badge = !ready
    ? { class: 'status-2', text: t('routers.neverReported') }
    : isHealthy(ready)
      ? { class: 'status-1', text: t('routers.ready') }
      : { class: 'status-2', text: t('routers.notReady') };
  return (
    <article class="card" aria-labelledby={`rt-${r.name}`} data-router={r.name}>
      <header>
        <h2 id={`rt-${r.name}`}>
          {r.spec.displayName} <span class="muted">{r.name}</span>
        </h2>
        <span class={`badge ${badge.class}`}>{badge.text}</span>
      </header>
      {/* only a condition out of its healthy state is news (docs/kubernetes.md, Conditions) */}
      {conditions
        .filter((c) => !isHealthy(c))
        .map((c) => (
          <div class="warning" role="status" key={c.type} data-condition={c.type}>
            <strong>
              {c.type}={c.status}: {c.reason}
            </strong>
            <p>{localText(c)}</p>
            <p class="muted">{t('routers.since', { time: dateTime(c.lastTransitionTime) })}</p>
          </div>
        ))}
      <Dl
        items={[
          [
            t('routers.lastHeartbeat'),
            heartbeat ? `${ago(heartbeat)} (${dateTime(heartbeat)})` : t('common.never'),
          ],
          [t('routers.agentVersion'), r.status.agentVersion ?? '–'],
          [t('routers.region'), [r.spec.region, r.spec.location].filter(Boolean).join(' · ')],
          [t('routers.endpointHost'), <code>{r.spec.endpointHost}</code>],
          [
            t('routers.capacity'),
            t('routers.capacityValue', {
              n: props.sessions.length,
              max: r.spec.maxSessions ?? '∞',
            }),
          ],
          [
            t('routers.flags'),
            [
              r.spec.acceptingSessions === false ? t('routers.closed') : t('routers.open'),
              r.spec.autoApprove ? t('routers.autoApprove') : '',
            ]
              .filter(Boolean)
              .join(', '),
          ],
        ]}
      />
      <RouterSwitch router={r} onChanged={props.onChanged} />
      <h3>{t('routers.sessionsByStatus')}</h3>
      {byStatus.size === 0 ? (
        <p>{t('routers.noSessions')}</p>
      ) : (
        <ul class="counts">
          {[...byStatus.entries()]
            .sort((a, b) => a[0] - b[0])
            .map(([code, n]) => (
              <li key={code}>
                <span class={`badge status-${code}`}>
                  {props.sessions.find((s) => s.status === code)?.statusName}
                </span>{' '}
                {n} <span class="muted">{statusWords(code)}</span>
              </li>
            ))}
        </ul>
      )}
      {conditions.length > 0 && (
        <details>
          <summary>
            {conditions.every(isHealthy)
              ? t('routers.conditionsHealthy', { n: conditions.length })
              : t('routers.conditions', { n: conditions.length })}
          </summary>
          <ul>
            {conditions.map((c) => (
              <li key={c.type}>
                <code>
                  {c.type}={c.status}
                </code>{' '}
                {c.reason} — {localText(c)} <span class="muted">{ago(c.lastTransitionTime)}</span>
              </li>
            ))}
          </ul>
        </details>
      )}
    </article>
  );
}

export function PolicyPage() {
  const [data, error] = useLoad(() => api.policy());
  return (
    <section aria-labelledby="policy-title">
      <h1 id="policy-title">{t('policy.title')}</h1>
      <p>{t('policy.intro')}</p>
      <Problem error={error} />
      {data && (
        <Dl
          items={Object.entries(data.spec).map(([k, v]) => [
            k,
            typeof v === 'object' ? (
              <pre class="code" tabIndex={0}>
                {JSON.stringify(v, null, 2)}
              </pre>
            ) : (
              <code>{String(v)}</code>
            ),
          ])}
        />
      )}
    </section>
  );
}
