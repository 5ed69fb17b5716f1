/** A peer's sessions: live state, what to do about it, and the actions a peer has (docs/api.md). */
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  api,
  ApiError,
  watchSessions,
  type Decision,
  type ForgeConflictNote,
  type SessionChanges,
  type SessionRecord,
} from '../api.ts';
import { BgpOptions, described, Dl, Field, focusFirstError, Problem, StatusBadge } from '../components.tsx';
import { ago, bytes, count, dateTime, rtt } from '../format.ts';
import { t } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';
import { localText } from '../i18n/problems/index.ts';
import { advice, sessionWords } from './advice.ts';
import { ConfigPanel } from './config.tsx';
import { LookingGlassPanel } from './looking-glass.tsx';
import { HistoryPanel } from './history.tsx';
import { AdoptedNotice } from './reviewed-values.tsx';

export function SessionsPage(props: { networkAsn: number | undefined; admin: boolean }) {
  const [sessions, setSessions] = useState<SessionRecord[]>();
  const [error, setError] = useState<unknown>();
  const load = async () => {
    try {
      setSessions((await api.sessions()).sessions);
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };
  // the list as the controller sends it at each change (docs/user-guide.md); `load` after the user's actions
  useEffect(() => {
    const stop = new AbortController();
    watchSessions((list) => {
      setSessions(list);
      setError(undefined);
    }, stop.signal).catch(setError);
    return () => stop.abort();
  }, []);
  const networkAsn = props.networkAsn ?? sessions?.find((s) => s.networkAsn)?.networkAsn ?? undefined;

  return (
    <section aria-labelledby="sessions-title">
      <div class="title-row">
        <h1 id="sessions-title">{props.admin ? t('sessions.titleAdmin') : t('sessions.title')}</h1>
        <a class="button" href="#/new">
          {t('sessions.create')}
        </a>
      </div>
      <Problem error={error} />
      {sessions === undefined && !error && <p>{t('common.loading')}</p>}
      {sessions?.length === 0 && <p>{t('sessions.none')}</p>}
      {sessions?.map((s) => (
        <SessionCard key={s.uuid} session={s} networkAsn={networkAsn} onChange={load} />
      ))}
    </section>
  );
}

function SessionCard(props: {
  session: SessionRecord;
  networkAsn: number | undefined;
  onChange: () => void;
}) {
  const s = props.session;
  const [error, setError] = useState<unknown>();
  const [editing, setEditing] = useState(false);
  const [showConfig, setShowConfig] = useState(false);
  const [showLookingGlass, setShowLookingGlass] = useState(false);
  const [showHistory, setShowHistory] = useState(false);
  const modifyButton = useRef<HTMLButtonElement>(null);
  const configButton = useRef<HTMLButtonElement>(null);
  const act = async (what: () => Promise<unknown>) => {
    setError(undefined);
    try {
      await what();
      props.onChange();
    } catch (err) {
      setError(err);
    }
  };
  const steps = advice(s, props.networkAsn);
  const canRestart = [1, 2, 6].includes(s.status);
  const canDelete = s.status !== 5;
  const m = s.metrics;

  return (
    <article class="card session" aria-labelledby={`s-${s.uuid}`} data-uuid={s.uuid}>
      <header>
        <h2 id={`s-${s.uuid}`}>
          {s.routerName} <span class="muted">AS{s.asn}</span>
        </h2>
        <StatusBadge code={s.status} name={s.statusName} />
      </header>
      <p class="status-words" data-testid="status-words" data-waiting={s.waiting?.for}>
        {sessionWords(s)}
      </p>
      <Dl
        items={[
          [
            t('session.bgpState'),
            <span data-testid="bgp-state">{s.bgpState ?? t('session.notReported')}</span>,
          ],
          [t('session.bgpSince'), s.bgpSince ? `${dateTime(s.bgpSince)} (${ago(s.bgpSince)})` : '–'],
          [t('session.lastHandshake'), s.lastHandshake ? ago(s.lastHandshake) : t('common.never')],
          [t('session.rtt'), rtt(m?.rtt)],
          [t('session.routes'), <span data-testid="routes">{count(m?.routesImported)}</span>],
          [t('session.bytes'), t('session.bytesValue', { rx: bytes(m?.rxBytes), tx: bytes(m?.txBytes) })],
          [t('session.serverEndpoint'), <code>{s.serverEndpoint}</code>],
          [
            t('session.serverPublicKey'),
            <code class="wrap" data-testid="server-public-key">
              {s.serverPublicKey ?? '–'}
            </code>,
          ],
          [t('session.interface'), <code>{s.interface}</code>],
          [
            t('session.addresses'),
            <code class="wrap">{[s.ipv6, s.ipv6LinkLocal, s.ipv4].filter(Boolean).join(', ')}</code>,
          ],
          [t('session.endpoint'), s.endpoint ? <code>{s.endpoint}</code> : t('session.noEndpoint')],
          [t('session.mtu'), String(s.mtu)],
          [t('session.uuid'), <code class="wrap">{s.uuid}</code>],
        ]}
      />
      {s.decision && <DecisionNotice decision={s.decision} />}
      {s.forgeConflict && <ForgeConflictNotice conflict={s.forgeConflict} />}
      <AdoptedNotice session={s} />
      {s.lastError && (
        <div class="last-error" role="status">
          <strong>{t('session.lastError')}</strong> <code>{s.lastError.code}</code>
          <p>{localText(s.lastError)}</p>
        </div>
      )}
      {steps.length > 0 && (
        <div class="advice">
          <h3>{t('session.whatToDo')}</h3>
          <ol>
            {steps.map((step) => (
              <li key={step}>{step}</li>
            ))}
          </ol>
        </div>
      )}
      <div class="buttons">
        <button
          type="button"
          class="secondary"
          ref={configButton}
          aria-expanded={showConfig}
          onClick={() => setShowConfig(!showConfig)}
        >
          {t('session.config')}
        </button>
        {![5, 7, 8].includes(s.status) && (
          <button
            type="button"
            class="secondary"
            ref={modifyButton}
            aria-expanded={editing}
            onClick={() => setEditing(!editing)}
          >
            {t('session.modify')}
          </button>
        )}
        {[1, 2, 4].includes(s.status) && (
          <button
            type="button"
            class="secondary"
            aria-expanded={showLookingGlass}
            onClick={() => setShowLookingGlass(!showLookingGlass)}
          >
            {t('session.lookingGlass')}
          </button>
        )}
        {![5, 7, 8].includes(s.status) && (
          <button
            type="button"
            class="secondary"
            aria-expanded={showHistory}
            onClick={() => setShowHistory(!showHistory)}
          >
            {t('session.history')}
          </button>
        )}
        {canRestart && (
          <button type="button" class="secondary" onClick={() => act(() => api.restart(s.uuid))}>
            {t('session.restart')}
          </button>
        )}
        {canDelete && (
          <button
            type="button"
            class="danger"
            onClick={() => {
              if (window.confirm(t('session.deleteConfirm', { router: s.routerName })))
                void act(() => api.remove(s.uuid));
            }}
          >
            {t('session.delete')}
          </button>
        )}
      </div>
      {editing && (
        <ModifyForm
          session={s}
          onDone={() => {
            setEditing(false);
            modifyButton.current?.focus();
            props.onChange();
          }}
          onCancel={() => {
            // Escape closes the form and gives the focus back to the button that opened it
            setEditing(false);
            modifyButton.current?.focus();
          }}
        />
      )}
      {showConfig && (
        // Escape closes the panel as it does the Change form, the focus back on its button
        <div
          onKeyDown={(e) => {
            if (e.key !== 'Escape') return;
            setShowConfig(false);
            configButton.current?.focus();
          }}
        >
          <ConfigPanel uuid={s.uuid} />
        </div>
      )}
      {showLookingGlass && <LookingGlassPanel session={s} />}
      {showHistory && <HistoryPanel session={s} />}
      <Problem error={error} />
    </article>
  );
}

/** The admin's decision and its reason, as the owner reads it (docs/user-guide.md, statuses). */
function DecisionNotice(props: { decision: Decision }) {
  const d = props.decision;
  return (
    <div class="decision" role="status" data-testid="decision">
      <strong>{t(`decision.${d.action}`, { by: d.by, at: dateTime(d.at) })}</strong>
      <p data-testid="decision-reason">{d.reason ?? t('decision.noReason')}</p>
      {d.until && <p class="hint">{t('decision.until', { until: dateTime(d.until) })}</p>}
    </div>
  );
}

/** A change of the owner's that an edit on the forge replaced, and where it is kept (docs/gitops.md). */
function ForgeConflictNotice(props: { conflict: ForgeConflictNote }) {
  const c = props.conflict;
  return (
    <div class="decision" role="status" data-testid="forge-conflict">
      <strong>
        {t('forgeConflict.replaced', { at: dateTime(c.at), commit: c.forgeCommit.slice(0, 7) })}
      </strong>
      <p>
        {t('forgeConflict.kept')} <code class="wrap">{c.branch}</code>
      </p>
    </div>
  );
}

/** The fields the form shows: an API message about another (or about none) goes in the problem box. */
const MODIFY_FIELDS = [
  '/publicKey',
  '/linkLocal',
  '/ipv6',
  '/ipv4',
  '/endpoint',
  '/mtu',
  '/mpbgp',
  '/extendedNextHop',
];

/** The text fields of the Change form, in its order, with the create form's labels and hints. */
const TEXT_FIELDS = [
  { name: 'publicKey', hint: 'session.publicKeyChangeHint' },
  { name: 'linkLocal', hint: 'field.linkLocalHint' },
  { name: 'ipv6', hint: 'field.ipv6Hint' },
  { name: 'ipv4', hint: 'session.ipv4ChangeHint' },
  { name: 'endpoint', hint: 'field.endpointHint' },
] as const;
type TextField = (typeof TEXT_FIELDS)[number]['name'];

/** The form's values from the session: what Save compares with to send only what changed. */
function formOf(s: SessionRecord): Record<TextField, string> & { mtu: string; mpbgp: boolean; enh: boolean } {
  return {
    publicKey: s.publicKey,
    linkLocal: s.ipv6LinkLocal,
    ipv6: s.ipv6,
    ipv4: s.ipv4 ?? '',
    endpoint: s.endpoint ?? '',
    mtu: String(s.mtu),
    mpbgp: s.mpbgp,
    enh: s.extendedNextHop,
  };
}

/**
 * The session's Change form: every field a modify takes (docs/api.md, modify), sending only those that
 * differ from the session; the API's refusals appear at the field they name, in the reader's language.
 */
function ModifyForm(props: { session: SessionRecord; onDone: () => void; onCancel: () => void }) {
  const s = props.session;
  const [form, setForm] = useState(() => formOf(s));
  const { busy, error, run } = useAction();
  const id = `modify-${s.uuid}`;
  const fieldError = (p: string) => (error instanceof ApiError ? error.field(p) || undefined : undefined);
  const formRef = useRef<HTMLFormElement>(null);
  useEffect(() => {
    if (error) focusFirstError(formRef.current);
  }, [error]);
  const submit = (e: Event) => {
    e.preventDefault();
    const was = formOf(s);
    const changes: SessionChanges = {};
    for (const { name } of TEXT_FIELDS) {
      const value = form[name].trim();
      if (value === was[name]) continue;
      // empty: no endpoint, no IPv4 (the others cannot be empty: the API says so at the field)
      if (name === 'endpoint' || name === 'ipv4') changes[name] = value === '' ? null : value;
      else changes[name] = value;
    }
    if (Number(form.mtu) !== s.mtu) changes.mtu = Number(form.mtu);
    if (form.mpbgp !== s.mpbgp) changes.mpbgp = form.mpbgp;
    const enh = form.mpbgp && form.enh;
    if (enh !== s.extendedNextHop) changes.extendedNextHop = enh;
    return run(async () => {
      await api.modify(s.uuid, changes);
      props.onDone();
    });
  };
  return (
    <form
      class="stack modify"
      onSubmit={submit}
      noValidate
      ref={formRef}
      onKeyDown={(e) => e.key === 'Escape' && props.onCancel()}
    >
      {TEXT_FIELDS.map(({ name, hint }) => (
        <Field
          key={name}
          id={`${id}-${name}`}
          label={t(`field.${name}`)}
          hint={t(hint)}
          error={fieldError(`/${name}`)}
        >
          <input
            {...described(`${id}-${name}`, true, fieldError(`/${name}`))}
            spellcheck={name === 'publicKey' ? false : undefined}
            value={form[name]}
            onInput={(e) => setForm({ ...form, [name]: e.currentTarget.value })}
          />
        </Field>
      ))}
      <Field id={`${id}-mtu`} label={t('field.mtu')} error={fieldError('/mtu')}>
        <input
          {...described(`${id}-mtu`, false, fieldError('/mtu'))}
          inputMode="numeric"
          value={form.mtu}
          onInput={(e) => setForm({ ...form, mtu: e.currentTarget.value })}
        />
      </Field>
      <BgpOptions
        mpbgp={form.mpbgp}
        extendedNextHop={form.enh}
        error={fieldError('/mpbgp') || fieldError('/extendedNextHop')}
        onChange={(change) =>
          setForm({
            ...form,
            ...('mpbgp' in change ? { mpbgp: change.mpbgp } : { enh: change.extendedNextHop }),
          })
        }
      />
      <p class="hint">{t('session.modifyNote')}</p>
      <p class="hint">{t('session.modifyReviewNote')}</p>
      <button type="submit" disabled={busy}>
        {t('session.save')}
      </button>
      {/* nothing changed, or a refusal of no field shown here: the API's words, never nothing */}
      <Problem error={error} fields={MODIFY_FIELDS} />
    </form>
  );
}
