/**
 * The routers (docs/user-guide.md, Routers): each with its agent's health and sessions, and every admin
 * action of `peerops admin router` (docs/api.md, Admin API): add (the agent token shown once), edit the
 * fields, close to new sessions or open again, remove.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { isHealthy, routerReadiness } from '../../common/conditions.ts';
import { statusName } from '../../common/status.ts';
import { api, type AdminRouterRecord, type Condition } from '../api.ts';
import { Confirm, CopyButton, Dl, focusHeading, Problem, readinessBadge } from '../components.tsx';
import { ago, dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { localText } from '../i18n/problems/index.ts';
import { RouterEditor } from './router-form.tsx';
import { useLoad } from './admin.tsx';
import { statusWords } from './advice.ts';

/** When a form `open` closes (saved, Cancel, Escape), the focus goes back to the button that opened it. */
function useFocusBack(open: boolean, button: { current: HTMLButtonElement | null }): void {
  const was = useRef(open);
  useEffect(() => {
    if (was.current && !open) button.current?.focus();
    was.current = open;
  }, [open]);
}

export function RoutersPage() {
  const [data, error, reload] = useLoad(async () => {
    // each router says how many sessions it has in each status: no session list to read
    return { routers: (await api.adminRouters()).routers };
  });
  const [adding, setAdding] = useState(false);
  // the agent token of a router just added or given a new one: shown this once (docs/agent.md)
  const [added, setAdded] = useState<{ name: string; agentToken: string; rotated?: true }>();
  const [notice, setNotice] = useState<string>();
  const addButton = useRef<HTMLButtonElement>(null);
  useFocusBack(adding, addButton);
  useEffect(() => {
    if (added) document.getElementById('added-title')?.focus();
  }, [added]);
  const saved = async (message: string) => {
    setNotice(message);
    await reload();
  };
  return (
    <section aria-labelledby="routers-title">
      <h1 id="routers-title">{t('routers.title')}</h1>
      <Problem error={error} />
      <p class="notice" role="status" data-testid="routers-notice">
        {notice}
      </p>
      {added && (
        <div class="card" data-testid="agent-token">
          <h2 id="added-title" tabIndex={-1}>
            {added.rotated
              ? t('routerForm.rotatedTitle', { name: added.name })
              : t('routerForm.addedTitle', { name: added.name })}
          </h2>
          <p>{t('routerForm.tokenOnce')}</p>
          <pre class="code" tabIndex={0}>
            <code>{added.agentToken}</code>
          </pre>
          <div class="buttons">
            <CopyButton text={added.agentToken} />
            <button type="button" class="secondary" onClick={() => setAdded(undefined)}>
              {t('routerForm.tokenStored')}
            </button>
          </div>
        </div>
      )}
      {adding ? (
        <RouterEditor
          onSaved={(a) => {
            setAdding(false);
            if (a.agentToken) setAdded({ name: a.name, agentToken: a.agentToken });
            void saved(t('routerForm.addedNotice', { name: a.name }));
          }}
          onCancel={() => setAdding(false)}
        />
      ) : (
        <div class="buttons">
          <button type="button" ref={addButton} onClick={() => setAdding(true)}>
            {t('routerForm.addButton')}
          </button>
        </div>
      )}
      {data === undefined && !error && <p>{t('common.loading')}</p>}
      {data?.routers.length === 0 && <p>{t('routers.none')}</p>}
      {data?.routers.map((r) => (
        <RouterCard
          key={r.name}
          router={r}
          onChanged={reload}
          onSaved={saved}
          onToken={(agentToken) => {
            setAdded({ name: r.name, agentToken, rotated: true });
            void saved(t('routerForm.rotatedNotice', { name: r.name }));
          }}
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
  onChanged: () => Promise<void>;
  /** After an edit or a removal: the page says it and loads the routers again. */
  onSaved: (notice: string) => Promise<void>;
  /** After rotate-token: the page shows the new token, once. */
  onToken: (agentToken: string) => void;
}) {
  const r = props.router;
  const [editing, setEditing] = useState(false);
  const editButton = useRef<HTMLButtonElement>(null);
  useFocusBack(editing, editButton);
  const [removing, setRemoving] = useState(false);
  const [actionError, setActionError] = useState<unknown>();
  const [rotating, setRotating] = useState(false);
  const rotate = async () => {
    setRotating(false);
    setActionError(undefined);
    try {
      props.onToken((await api.rotateRouterToken(r.name)).agentToken);
    } catch (err) {
      setActionError(err);
    }
  };
  const remove = async () => {
    setRemoving(false);
    setActionError(undefined);
    try {
      await api.removeRouter(r.name);
      await props.onSaved(t('routerForm.removedNotice', { name: r.name }));
      focusHeading();
    } catch (err) {
      setActionError(err);
    }
  };
  const byStatus = r.sessionsByStatus ?? [];
  const total = byStatus.reduce((n, c) => n + c.count, 0);
  const conditions = conditionsOf(r);
  const heartbeat = r.status.lastHeartbeat;
  // the badge says what Ready says: the controller takes it back from a silent agent or a BIRD that is
  // down (docs/kubernetes.md, Conditions)
  const badge = readinessBadge(routerReadiness(conditions).state);
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
              n: total,
              max: r.spec.maxSessions ?? '∞',
            }),
          ],
          [
            t('routers.flags'),
            [
              r.spec.acceptingSessions === false ? t('routers.closed') : t('routers.open'),
              r.autoApproveHolds
                ? t('routers.autoApprove')
                : r.spec.autoApprove
                  ? t('routers.autoApproveWithoutEffect')
                  : '',
            ]
              .filter(Boolean)
              .join(', '),
          ],
        ]}
      />
      <RouterSwitch router={r} onChanged={props.onChanged} />
      {editing ? (
        <RouterEditor
          router={r}
          onSaved={() => {
            setEditing(false);
            void props.onSaved(t('routerForm.savedNotice', { name: r.name }));
          }}
          onCancel={() => setEditing(false)}
        />
      ) : (
        <div class="buttons">
          <button type="button" class="secondary" ref={editButton} onClick={() => setEditing(true)}>
            {t('routerForm.edit')}
          </button>
          <button type="button" class="secondary" onClick={() => setRotating(true)}>
            {t('routerForm.rotate')}
          </button>
          <button type="button" class="danger" onClick={() => setRemoving(true)}>
            {t('routerForm.remove')}
          </button>
        </div>
      )}
      {rotating && (
        <Confirm
          title={t('routerForm.rotateTitle', { name: r.name })}
          confirm={t('routerForm.rotateConfirm')}
          onConfirm={rotate}
          onClose={() => setRotating(false)}
        >
          <p>{t('routerForm.rotateText')}</p>
        </Confirm>
      )}
      <Problem error={actionError} />
      {removing && (
        <Confirm
          title={t('routerForm.removeTitle', { name: r.name })}
          confirm={t('routerForm.remove')}
          onConfirm={remove}
          onClose={() => setRemoving(false)}
        >
          <p>{t('routerForm.removeText', { n: total })}</p>
        </Confirm>
      )}
      <h3>{t('routers.sessionsByStatus')}</h3>
      {byStatus.length === 0 ? (
        <p>{t('routers.noSessions')}</p>
      ) : (
        <ul class="counts">
          {byStatus.map(({ status, count }) => (
            <li key={status}>
              <span class={`badge status-${status}`}>{statusName(status)}</span> {count}{' '}
              <span class="muted">{statusWords(status)}</span>
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
