/**
 * Tokens (docs/user-guide.md, Tokens): what `peerops admin token revoke`, `revoke-asn` and `list` do
 * (docs/login.md, Revoking tokens): revoke one token by its id, every token of an ASN issued until now
 * (asked again in a dialog first), and the list of what is revoked.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type Revocations } from '../api.ts';
import { Confirm, described, Field, focusFirstError, Problem } from '../components.tsx';
import { dateTime } from '../format.ts';
import { t } from '../i18n/index.ts';
import { useLoad } from './admin.tsx';

/** `4242421234` or `AS4242421234` → the number; anything else → undefined. */
function parseAsn(v: string): number | undefined {
  const m = /^(?:as)?([0-9]{1,10})$/i.exec(v.trim());
  return m ? Number(m[1]) : undefined;
}

export function TokensPage() {
  const [data, error, reload] = useLoad<Revocations>(() => api.revocations());
  const [notice, setNotice] = useState<string>();
  const done = async (message: string) => {
    setNotice(message);
    await reload();
  };
  return (
    <section aria-labelledby="tokens-title">
      <h1 id="tokens-title">{t('tokens.title')}</h1>
      <p>{t('tokens.intro')}</p>
      <p class="notice" role="status" data-testid="tokens-notice">
        {notice}
      </p>
      <RevokeOne onDone={done} />
      <RevokeAsn onDone={done} />
      <h2>{t('tokens.listTitle')}</h2>
      <Problem error={error} />
      {data === undefined && !error && <p>{t('common.loading')}</p>}
      {data && data.tokens.length + data.asns.length === 0 && <p>{t('tokens.none')}</p>}
      {data && data.tokens.length + data.asns.length > 0 && (
        <div class="table-wrap" role="region" aria-labelledby="tokens-list-caption" tabIndex={0}>
          <table class="sessions-table" data-testid="revocations">
            <caption id="tokens-list-caption">{t('tokens.listCaption')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('tokens.what')}</th>
                <th scope="col">{t('table.asn')}</th>
                <th scope="col">{t('tokens.until')}</th>
              </tr>
            </thead>
            <tbody>
              {data.asns.map((a) => (
                <tr key={`asn-${a.asn}`}>
                  <td>{t('tokens.everyToken')}</td>
                  <td>AS{a.asn}</td>
                  <td>{t('tokens.issuedUntil', { time: dateTime(a.issuedUntil) })}</td>
                </tr>
              ))}
              {data.tokens.map((x) => (
                <tr key={x.id}>
                  <td>
                    <code>{x.id}</code>
                  </td>
                  <td>AS{x.asn}</td>
                  <td>{t('tokens.expires', { time: dateTime(x.expiresAt) })}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function RevokeOne(props: { onDone: (notice: string) => Promise<void> }) {
  const [id, setId] = useState('');
  const [error, setError] = useState<unknown>();
  const formRef = useRef<HTMLFormElement>(null);
  useEffect(() => {
    if (error) focusFirstError(formRef.current);
  }, [error]);
  const fieldError = error instanceof ApiError ? error.field('/id') || undefined : undefined;
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      await api.revokeToken(id.trim());
      setId('');
      await props.onDone(t('tokens.revokedOne', { id: id.trim() }));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="stack card" onSubmit={submit} noValidate ref={formRef} aria-labelledby="revoke-one-title">
      <h2 id="revoke-one-title">{t('tokens.oneTitle')}</h2>
      <Field id="token-id" label={t('tokens.id')} hint={t('tokens.idHint')} error={fieldError}>
        <input
          {...described('token-id', true, fieldError)}
          value={id}
          autocomplete="off"
          spellcheck={false}
          onInput={(e) => setId(e.currentTarget.value)}
        />
      </Field>
      <Problem error={error} fields={['/id']} />
      <div class="buttons">
        <button type="submit" class="danger">
          {t('tokens.revoke')}
        </button>
      </div>
    </form>
  );
}

function RevokeAsn(props: { onDone: (notice: string) => Promise<void> }) {
  const [asn, setAsn] = useState('');
  const [asking, setAsking] = useState<number>();
  const [invalid, setInvalid] = useState(false);
  const [error, setError] = useState<unknown>();
  const formRef = useRef<HTMLFormElement>(null);
  useEffect(() => {
    if (error || invalid) focusFirstError(formRef.current);
  }, [error, invalid]);
  const apiField = error instanceof ApiError ? error.field('/asn') || undefined : undefined;
  const fieldError = invalid ? t('tokens.asnInvalid') : apiField;
  const submit = (e: Event) => {
    e.preventDefault();
    setError(undefined);
    const n = parseAsn(asn);
    setInvalid(n === undefined);
    if (n !== undefined) setAsking(n);
  };
  const revoke = async () => {
    const n = asking;
    setAsking(undefined);
    if (n === undefined) return;
    try {
      await api.revokeAsn(n);
      setAsn('');
      await props.onDone(t('tokens.revokedAsn', { asn: n }));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="stack card" onSubmit={submit} noValidate ref={formRef} aria-labelledby="revoke-asn-title">
      <h2 id="revoke-asn-title">{t('tokens.asnTitle')}</h2>
      <Field id="revoke-asn" label={t('tokens.asn')} hint={t('tokens.asnHint')} error={fieldError}>
        <input
          {...described('revoke-asn', true, fieldError)}
          value={asn}
          inputMode="numeric"
          autocomplete="off"
          onInput={(e) => setAsn(e.currentTarget.value)}
        />
      </Field>
      <Problem error={error} fields={['/asn']} />
      <div class="buttons">
        <button type="submit" class="danger">
          {t('tokens.revokeAsn')}
        </button>
      </div>
      {asking !== undefined && (
        <Confirm
          title={t('tokens.confirmTitle', { asn: asking })}
          confirm={t('tokens.revokeAsn')}
          onConfirm={revoke}
          onClose={() => setAsking(undefined)}
        >
          <p>{t('tokens.confirmText', { asn: asking })}</p>
        </Confirm>
      )}
    </form>
  );
}
