/**
 * The network page (docs/user-guide.md, The network), for everyone logged in: each router with what its
 * Ready says (GET /network), and a looking glass from any router to an address in DN42's ranges (POST
 * /lg: ping, traceroute, `show route for`).
 */
import { useState } from 'preact/hooks';
import type { LgAnswer } from '../../common/looking-glass.ts';
import { api } from '../api.ts';
import { Problem, readinessBadge } from '../components.tsx';
import { ago, dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';
import { useLoad } from './admin.tsx';

type Op = 'ping' | 'traceroute' | 'route';
const OPS: Op[] = ['ping', 'traceroute', 'route'];

export function NetworkPage() {
  const [data, error] = useLoad(() => api.network());
  const routers = data?.routers ?? [];
  return (
    <section aria-labelledby="network-title" class="network">
      <h1 id="network-title">{t('network.title')}</h1>
      <p>{t('network.intro')}</p>
      <Problem error={error} />
      {data === undefined && !error && <p role="status">{t('common.loading')}</p>}
      {data && routers.length === 0 && <p>{t('routers.none')}</p>}
      {routers.length > 0 && (
        <div class="table-wrap" role="region" aria-labelledby="network-routers" tabIndex={0}>
          <table class="sessions-table" data-testid="network-routers">
            <caption id="network-routers">{t('network.routers')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('network.router')}</th>
                <th scope="col">{t('routers.region')}</th>
                <th scope="col">{t('network.state')}</th>
                <th scope="col">{t('network.sessionsUp')}</th>
                <th scope="col">{t('network.accepting')}</th>
                <th scope="col">{t('routers.lastHeartbeat')}</th>
              </tr>
            </thead>
            <tbody>
              {routers.map((r) => {
                const badge = readinessBadge(r.state);
                return (
                  <tr key={r.name} data-router={r.name}>
                    <th scope="row">
                      {r.displayName} <span class="muted">{r.name}</span>
                    </th>
                    <td>{[r.region, r.location].filter(Boolean).join(' · ')}</td>
                    <td>
                      <span class={`badge ${badge.class}`}>{badge.text}</span>
                      {r.state === 'notReady' && r.reason && <span class="muted"> {r.reason}</span>}
                    </td>
                    <td>{r.activeSessions}</td>
                    <td>{r.accepting ? t('routers.open') : t('routers.closed')}</td>
                    <td>
                      {r.lastHeartbeat ? (
                        <time dateTime={r.lastHeartbeat} title={dateTime(r.lastHeartbeat)}>
                          {ago(r.lastHeartbeat)}
                        </time>
                      ) : (
                        t('common.never')
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {routers.length > 0 && <NetworkLookingGlass routers={routers.map((r) => r.name)} />}
    </section>
  );
}

function NetworkLookingGlass(props: { routers: string[] }) {
  const [router, setRouter] = useState(props.routers[0] ?? '');
  const [op, setOp] = useState<Op>('ping');
  const [target, setTarget] = useState('');
  const [answer, setAnswer] = useState<LgAnswer>();
  const { busy: loading, error, run } = useAction();
  const ask = () => {
    setAnswer(undefined);
    return run(async () => setAnswer(await api.lg({ op, router, target: target.trim() })));
  };
  return (
    <section class="looking-glass" aria-labelledby="network-lg-title">
      <h2 id="network-lg-title">{t('lg.title')}</h2>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void ask();
        }}
      >
        <label for="network-lg-router">{t('network.router')}</label>
        <select id="network-lg-router" value={router} onChange={(e) => setRouter(e.currentTarget.value)}>
          {props.routers.map((name) => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
        </select>
        <label for="network-lg-op">{t('network.operation')}</label>
        <select id="network-lg-op" value={op} onChange={(e) => setOp(e.currentTarget.value as Op)}>
          {OPS.map((o) => (
            <option key={o} value={o}>
              {t(`network.op.${o}`)}
            </option>
          ))}
        </select>
        <label for="network-lg-target">{t('network.target')}</label>
        <input
          id="network-lg-target"
          value={target}
          required
          spellcheck={false}
          autocomplete="off"
          placeholder="fd42:4242:2601::1"
          onInput={(e) => setTarget(e.currentTarget.value)}
        />
        <button type="submit">{t('network.ask')}</button>
      </form>
      <p class="hint">{t('network.hint')}</p>
      {loading && <p role="status">{t('common.loading')}</p>}
      {answer && (
        <figure class="config-file">
          <pre class="code" tabIndex={0} data-testid="network-lg-output">
            {answer.output || t('lg.empty')}
          </pre>
          {answer.timedOut && <p role="status">{t('lg.timedOut')}</p>}
          {answer.truncated && <p role="status">{t('lg.truncated')}</p>}
        </figure>
      )}
      <Problem error={error} />
    </section>
  );
}
