/**
 * One session as an admin decides on it (docs/user-guide.md, Reviewing a session): the DN42 registry's
 * aut-num and route objects for its addresses, the policy's checks, and the admin actions its status
 * allows (docs/api.md, Admin API).
 */
import { useEffect, useState } from 'preact/hooks';
import { allowed } from '../../common/state-machine.ts';
import { api, type AdminAction, type AdminSessionReviewResponse } from '../api.ts';
import { described, Dl, Field, Problem, StatusBadge } from '../components.tsx';
import { AdoptedNotice, ModifiedNotice, PolicyChecks, reviewedRows } from './reviewed-values.tsx';
import { localText } from '../i18n/problems/index.ts';
import { dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { ADMIN_ACTIONS } from './admin-sessions.tsx';

export function ReviewPage(props: { uuid: string }) {
  const [data, setData] = useState<AdminSessionReviewResponse>();
  const [error, setError] = useState<unknown>();
  const [actionError, setActionError] = useState<unknown>();
  const [reason, setReason] = useState('');
  const [needReason, setNeedReason] = useState(false);
  const [done, setDone] = useState<string>();
  const load = async () => {
    try {
      setData(await api.adminReview(props.uuid));
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void load();
  }, [props.uuid]);

  const act = async (action: AdminAction, needsReason: boolean) => {
    setActionError(undefined);
    setDone(undefined);
    if (needsReason && !reason.trim()) {
      setNeedReason(true);
      document.getElementById('review-reason')?.focus();
      return;
    }
    setNeedReason(false);
    try {
      const answer = await api.adminSession(action, props.uuid, reason.trim());
      setDone(
        'deleted' in answer ? t('review.removed') : t('review.nowStatus', { status: answer.statusName }),
      );
      await load();
    } catch (err) {
      setActionError(err);
    }
  };
  const s = data?.session;
  const r = data?.registry;
  const violations = s?.policyViolations ?? [];
  const reasonError = needReason && !reason.trim() ? t('table.reasonNeeded') : undefined;
  // what the session's status allows, by the state machine itself (common/state-machine.ts)
  const actions = s ? ADMIN_ACTIONS.filter((a) => allowed(s.status, { kind: a.action })) : [];

  return (
    <section aria-labelledby="review-title">
      <p>
        <a href="#/admin/sessions">{t('review.back')}</a>
      </p>
      <h1 id="review-title">
        {s ? t('review.title', { asn: s.asn, router: s.routerName }) : t('review.loadingTitle')}
      </h1>
      <Problem error={error} />
      {!data && !error && <p>{t('common.loading')}</p>}
      {s && (
        <>
          <p>
            <StatusBadge code={s.status} name={s.statusName} />{' '}
            <span class="muted">{t('review.requested', { time: dateTime(s.createdAt) })}</span>
          </p>
          <h2>{t('review.registry')}</h2>
          {r === null || r === undefined ? (
            <p>{t('review.noRegistry')}</p>
          ) : (
            <>
              {!r.found && (
                <p class="problem" role="alert">
                  {t('review.noAutNum', { asn: s.asn })}
                </p>
              )}
              <Dl
                items={[
                  [t('review.asName'), r.asName ?? '–'],
                  [t('review.mntBy'), r.mntBy.join(', ') || '–'],
                  [t('review.adminC'), r.adminC.join(', ') || '–'],
                  [t('review.techC'), r.techC.join(', ') || '–'],
                ]}
              />
              <h3>{t('review.routes')}</h3>
              {r.addresses.map((a) => (
                <div key={a.field} class={a.problem ? 'checks-failed' : 'checks-passed'} data-field={a.field}>
                  <p>
                    <code>{a.address}</code>{' '}
                    {a.problem ? t('review.notTheirs') : t('review.theirs', { asn: s.asn })}
                  </p>
                  {a.objects.length === 0 ? (
                    <p>{t('review.noObjects')}</p>
                  ) : (
                    <ul>
                      {a.objects.map((o) => (
                        <li key={o.prefix}>
                          <code>
                            {o.type} {o.prefix}
                          </code>{' '}
                          {o.origins.map((n) => `AS${n}`).join(', ') || t('review.noOrigin')}
                          {!o.counts && <span class="muted"> ({t('review.denied')})</span>}
                        </li>
                      ))}
                    </ul>
                  )}
                  {a.problem && <p>{a.problem}</p>}
                </div>
              ))}
            </>
          )}
          <h2>{t('reviews.checks')}</h2>
          <PolicyChecks violations={violations} />
          <h2>{t('review.session')}</h2>
          <ModifiedNotice session={s} />
          <AdoptedNotice session={s} />
          <Dl
            items={[
              ...reviewedRows(s),
              [t('session.lastError'), s.lastError ? localText(s.lastError) : '–'],
              [t('session.uuid'), <code class="wrap">{s.uuid}</code>],
            ]}
          />
          {actions.length > 0 && (
            <>
              <h2>{t('review.decide')}</h2>
              <Field
                id="review-reason"
                label={t('reviews.reason')}
                hint={t('table.reasonHint')}
                error={reasonError}
              >
                <input
                  {...described('review-reason', true, reasonError)}
                  value={reason}
                  maxLength={500}
                  onInput={(e) => setReason(e.currentTarget.value)}
                />
              </Field>
              <div class="buttons">
                {actions.map((a) => (
                  <button
                    key={a.action}
                    type="button"
                    class={a.needsReason ? 'danger' : undefined}
                    onClick={() => act(a.action, a.needsReason)}
                  >
                    {t(a.label)}
                  </button>
                ))}
              </div>
            </>
          )}
          <Problem error={actionError} />
          {done && <p role="status">{done}</p>}
        </>
      )}
    </section>
  );
}
