/**
 * A session's looking glass (POST /lg, docs/user-guide.md): its BGP protocol as the router shows it, the
 * routes received from it and exported to it a page at a time, and ping or traceroute from its router.
 */
import { useState } from 'preact/hooks';
import type { LgAnswer } from '../../common/looking-glass.ts';
import { api, type SessionRecord } from '../api.ts';
import { Problem } from '../components.tsx';
import { t } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';

const PAGE = 100;

type Query =
  | { op: 'protocol' }
  | { op: 'routes'; direction: 'received' | 'exported'; offset: number }
  | { op: 'ping' | 'traceroute'; target: string };

export function LookingGlassPanel(props: { session: SessionRecord }) {
  const s = props.session;
  const [target, setTarget] = useState(s.ipv6);
  const [asked, setAsked] = useState<Query>();
  const [answer, setAnswer] = useState<LgAnswer>();
  const { busy: loading, error, run } = useAction();
  const id = `lg-${s.uuid}`;
  const ask = (query: Query) => {
    setAsked(query);
    setAnswer(undefined);
    return run(async () =>
      setAnswer(
        await api.lg(
          query.op === 'ping' || query.op === 'traceroute'
            ? { op: query.op, router: s.router, target: query.target }
            : query.op === 'routes'
              ? {
                  op: 'routes',
                  session: s.uuid,
                  direction: query.direction,
                  offset: query.offset,
                  limit: PAGE,
                }
              : { op: 'protocol', session: s.uuid },
        ),
      ),
    );
  };
  const page = answer?.page;
  return (
    <section class="looking-glass" aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>{t('lg.title')}</h3>
      <div class="buttons">
        <button type="button" class="secondary" onClick={() => ask({ op: 'protocol' })}>
          {t('lg.protocol')}
        </button>
        <button
          type="button"
          class="secondary"
          onClick={() => ask({ op: 'routes', direction: 'received', offset: 0 })}
        >
          {t('lg.received')}
        </button>
        <button
          type="button"
          class="secondary"
          onClick={() => ask({ op: 'routes', direction: 'exported', offset: 0 })}
        >
          {t('lg.exported')}
        </button>
      </div>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void ask({ op: 'ping', target: target.trim() });
        }}
      >
        <label for={`${id}-target`}>{t('lg.target')}</label>
        <input
          id={`${id}-target`}
          value={target}
          spellcheck={false}
          autocomplete="off"
          onInput={(e) => setTarget(e.currentTarget.value)}
        />
        <button type="submit" class="secondary">
          {t('lg.ping')}
        </button>
        <button
          type="button"
          class="secondary"
          onClick={() => ask({ op: 'traceroute', target: target.trim() })}
        >
          {t('lg.traceroute')}
        </button>
      </form>
      <p class="hint">{t('lg.hint')}</p>
      {loading && (
        <p role="status" data-testid="lg-loading">
          {t('common.loading')}
        </p>
      )}
      {answer?.routes && answer.routes.length > 0 && (
        <table class="sessions-table lg-routes" data-testid="lg-routes">
          <caption>{t('lg.routesCaption')}</caption>
          <thead>
            <tr>
              <th scope="col">{t('lg.prefix')}</th>
              <th scope="col">{t('lg.verdict')}</th>
              <th scope="col">{t('lg.roa')}</th>
            </tr>
          </thead>
          <tbody>
            {answer.routes.map((r, i) => (
              <tr key={`${r.net}-${i}`}>
                <td>
                  <code>{r.net}</code>
                </td>
                <td>{t(`lg.verdict.${r.verdict}`)}</td>
                <td>{t(`lg.roa.${r.roa}`)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {answer && (
        <figure class="config-file">
          <pre class="code" tabIndex={0} data-testid="lg-output">
            {answer.output || t('lg.empty')}
          </pre>
          {answer.timedOut && <p role="status">{t('lg.timedOut')}</p>}
          {answer.truncated && <p role="status">{t('lg.truncated')}</p>}
          {page && asked?.op === 'routes' && (
            <div class="buttons">
              <span data-testid="lg-page">
                {t('lg.page', {
                  from: Math.min(page.offset + 1, page.total),
                  to: Math.min(page.offset + page.limit, page.total),
                  total: page.total,
                })}
              </span>
              {page.offset > 0 && (
                <button
                  type="button"
                  class="secondary"
                  onClick={() => ask({ ...asked, offset: Math.max(0, page.offset - PAGE) })}
                >
                  {t('lg.previous')}
                </button>
              )}
              {page.offset + page.limit < page.total && (
                <button
                  type="button"
                  class="secondary"
                  onClick={() => ask({ ...asked, offset: page.offset + PAGE })}
                >
                  {t('lg.next')}
                </button>
              )}
            </div>
          )}
        </figure>
      )}
      <Problem error={error} />
    </section>
  );
}
