/** Pick a router and create a session; the API's messages appear at the field they name. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type CreateResponse, type PublicRouter } from '../api.ts';
import type { NearRoutersResponse } from '../../controller/api/responses.ts';
import { rtt as formatRtt } from '../format.ts';
import { BgpOptions, described, Dl, Field, focusFirstError, focusHeading, Problem } from '../components.tsx';
import { t } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';
import { ConfigPanel } from './config.tsx';

interface Form {
  ipv6: string;
  linkLocal: string;
  ipv4: string;
  endpoint: string;
  publicKey: string;
  mtu: string;
  mpbgp: boolean;
  extendedNextHop: boolean;
}

const EMPTY: Form = {
  ipv6: '',
  linkLocal: '',
  ipv4: '',
  endpoint: '',
  publicKey: '',
  mtu: '1420',
  mpbgp: true,
  extendedNextHop: true,
};

/** The fields the form shows the API's errors beside. */
const FIELDS = ['/router', ...Object.keys(EMPTY).map((k) => `/${k}`)];

export function CreatePage(props: {
  routers: PublicRouter[] | undefined;
  /** Why the routers could not be loaded (rate-limited, unreachable): said, with a retry. */
  routersError: unknown;
  onRetryRouters: () => void;
  networkAsn: number | undefined;
}) {
  const [router, setRouter] = useState<string>();
  const [form, setForm] = useState<Form>(EMPTY);
  const { busy, error, run } = useAction();
  const [created, setCreated] = useState<CreateResponse>();
  // each router's RTT to the endpoint, measured on request (GET /routers/near)
  const [near, setNear] = useState<NearRoutersResponse>();
  const [nearError, setNearError] = useState<unknown>();
  const [measuring, setMeasuring] = useState(false);
  const [needEndpoint, setNeedEndpoint] = useState(false);
  const set = <K extends keyof Form>(k: K, v: Form[K]) => setForm({ ...form, [k]: v });
  const fieldError = (p: string) => (error instanceof ApiError ? error.field(p) || undefined : undefined);
  const formRef = useRef<HTMLFormElement>(null);
  // after a submit: the answer's heading, or the first field the API named (docs/user-guide.md, Keyboard)
  useEffect(() => {
    if (created) focusHeading();
  }, [created]);
  useEffect(() => {
    if (error) focusFirstError(formRef.current);
  }, [error]);

  const measure = async () => {
    setNearError(undefined);
    setNeedEndpoint(!form.endpoint.trim());
    if (!form.endpoint.trim()) return;
    setMeasuring(true);
    try {
      const answer = await api.near(form.endpoint.trim());
      setNear(answer);
      // the nearest that answered is preselected; the peer may still pick another
      const nearest = answer.routers.find((r) => r.rtt !== null);
      if (nearest) setRouter(nearest.name);
    } catch (err) {
      setNearError(err);
    } finally {
      setMeasuring(false);
    }
  };
  const distance = (name: string) => near?.routers.find((r) => r.name === name);
  // measured routers first, nearest first; the others (closed to new sessions) after, as listed
  const rank = (r: PublicRouter) => {
    const i = near?.routers.findIndex((m) => m.name === r.name && m.rtt !== null) ?? -1;
    return i < 0 ? Infinity : i;
  };
  const routers = props.routers ? [...props.routers].sort((a, b) => rank(a) - rank(b)) : undefined;

  const submit = (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {
      router: router ?? '',
      ipv6: form.ipv6.trim(),
      linkLocal: form.linkLocal.trim(),
      publicKey: form.publicKey.trim(),
      mtu: Number(form.mtu),
      mpbgp: form.mpbgp,
      extendedNextHop: form.mpbgp && form.extendedNextHop,
    };
    if (form.ipv4.trim()) body.ipv4 = form.ipv4.trim();
    if (form.endpoint.trim()) body.endpoint = form.endpoint.trim();
    return run(async () => setCreated(await api.create(body)));
  };

  if (created) {
    const asn = created.networkAsn ?? props.networkAsn;
    return (
      <section aria-labelledby="created-title">
        <h1 id="created-title">{t('create.done', { status: created.statusName })}</h1>
        <p>{t('create.configureYourSide')}</p>
        <Dl
          items={[
            [t('create.answer.endpoint'), <code>{created.serverEndpoint}</code>],
            [t('create.answer.publicKey'), <code class="wrap">{created.serverPublicKey}</code>],
            [t('create.answer.linkLocal'), <code>{created.serverLinkLocal}</code>],
            ...(created.serverIpv4
              ? [
                  [t('create.answer.ipv4'), <code>{created.serverIpv4}</code>] as [
                    string,
                    preact.ComponentChildren,
                  ],
                ]
              : []),
            [t('create.answer.asn'), asn ? `AS${asn}` : t('common.unknownAsn')],
            [t('create.answer.interface'), <code>{created.interface}</code>],
          ]}
        />
        <h2>{t('create.configTitle')}</h2>
        <ConfigPanel uuid={created.uuid} />
        <p>
          <a href="#/">{t('create.toSessions')}</a>
        </p>
      </section>
    );
  }

  return (
    <section aria-labelledby="create-title">
      <h1 id="create-title">{t('create.title')}</h1>
      <form class="stack" onSubmit={submit} noValidate ref={formRef}>
        <fieldset>
          <legend>{t('create.pickRouter')}</legend>
          {fieldError('/router') && (
            <p class="field-error" role="alert">
              {fieldError('/router')}
            </p>
          )}
          {props.routersError ? (
            <div class="stack">
              <Problem error={props.routersError} />
              <button type="button" class="secondary" onClick={props.onRetryRouters}>
                {t('common.retry')}
              </button>
            </div>
          ) : props.routers === undefined ? (
            <p>{t('common.loading')}</p>
          ) : (
            props.routers.length === 0 && <p>{t('create.noRouters')}</p>
          )}
          {props.routers && props.routers.length > 0 && (
            <div class="near">
              <button type="button" class="secondary" onClick={measure} disabled={measuring}>
                {measuring ? t('create.nearMeasuring') : t('create.near')}
              </button>
              <p class="hint">{t('create.nearHint')}</p>
              {needEndpoint && (
                <p class="field-error" role="alert">
                  {t('create.nearNeedsEndpoint')}
                </p>
              )}
              <Problem error={nearError} />
            </div>
          )}
          <div class="router-list">
            {routers?.map((r) => (
              <label key={r.name} class={`router-option${r.accepting ? '' : ' closed'}`}>
                <input
                  type="radio"
                  name="router"
                  value={r.name}
                  disabled={!r.accepting}
                  checked={router === r.name}
                  onChange={() => setRouter(r.name)}
                />
                <span class="router-name">{r.displayName}</span>
                <span class="muted">
                  {[r.region, r.location].filter(Boolean).join(' · ')} · <code>{r.endpointHost}</code>
                </span>
                <span class={r.accepting ? 'ok' : 'warn'}>
                  {r.accepting
                    ? typeof r.freeSlots === 'number'
                      ? t('create.freeSlots', { n: r.freeSlots })
                      : t('create.accepting')
                    : t('create.notAccepting')}
                </span>
                {distance(r.name) && (
                  <span class="rtt" data-testid="router-rtt">
                    {distance(r.name)?.rtt === null
                      ? t('create.rttNone')
                      : t('create.rtt', { rtt: formatRtt(distance(r.name)?.rtt) })}
                    {near?.routers[0]?.name === r.name && near.routers[0].rtt !== null && (
                      <strong> · {t('create.nearest')}</strong>
                    )}
                  </span>
                )}
              </label>
            ))}
          </div>
        </fieldset>
        <Field id="f-ipv6" label={t('field.ipv6')} hint={t('field.ipv6Hint')} error={fieldError('/ipv6')}>
          <input
            {...described('f-ipv6', true, fieldError('/ipv6'))}
            value={form.ipv6}
            onInput={(e) => set('ipv6', e.currentTarget.value)}
          />
        </Field>
        <Field
          id="f-linkLocal"
          label={t('field.linkLocal')}
          hint={t('field.linkLocalHint')}
          error={fieldError('/linkLocal')}
        >
          <input
            {...described('f-linkLocal', true, fieldError('/linkLocal'))}
            value={form.linkLocal}
            onInput={(e) => set('linkLocal', e.currentTarget.value)}
          />
        </Field>
        <Field
          id="f-publicKey"
          label={t('field.publicKey')}
          hint={t('field.publicKeyHint')}
          error={fieldError('/publicKey')}
        >
          <input
            {...described('f-publicKey', true, fieldError('/publicKey'))}
            spellcheck={false}
            value={form.publicKey}
            onInput={(e) => set('publicKey', e.currentTarget.value)}
          />
        </Field>
        <Field
          id="f-endpoint"
          label={t('field.endpoint')}
          hint={t('field.endpointHint')}
          error={fieldError('/endpoint')}
        >
          <input
            {...described('f-endpoint', true, fieldError('/endpoint'))}
            value={form.endpoint}
            onInput={(e) => set('endpoint', e.currentTarget.value)}
          />
        </Field>
        <Field id="f-ipv4" label={t('field.ipv4')} hint={t('field.ipv4Hint')} error={fieldError('/ipv4')}>
          <input
            {...described('f-ipv4', true, fieldError('/ipv4'))}
            value={form.ipv4}
            onInput={(e) => set('ipv4', e.currentTarget.value)}
          />
        </Field>
        <Field id="f-mtu" label={t('field.mtu')} error={fieldError('/mtu')}>
          <input
            {...described('f-mtu', false, fieldError('/mtu'))}
            inputMode="numeric"
            value={form.mtu}
            onInput={(e) => set('mtu', e.currentTarget.value)}
          />
        </Field>
        <BgpOptions
          mpbgp={form.mpbgp}
          extendedNextHop={form.extendedNextHop}
          error={fieldError('/mpbgp') || fieldError('/extendedNextHop')}
          onChange={(change) => setForm({ ...form, ...change })}
        />
        <button type="submit" disabled={busy || !router}>
          {t('create.submit')}
        </button>
        <Problem error={error} fields={FIELDS} />
      </form>
    </section>
  );
}
