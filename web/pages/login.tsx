/**
 * Log in by signing a challenge (docs/login.md): the page asks for a challenge, shows it with the exact
 * commands that sign it, and takes the pasted signature. The private key stays where it is; the page
 * only ever sees the challenge and the signature.
 */
import { useState } from 'preact/hooks';
import { api, type Challenge, type Login } from '../api.ts';
import { CopyButton, described, DownloadButton, Field, Problem } from '../components.tsx';
import { t } from '../i18n/index.ts';

/** A here-document that writes the challenge byte for byte (its final newline included). */
function saveCommand(c: Challenge): string {
  return `cat > challenge.txt <<'EOF'\n${c.challenge}EOF`;
}

export function sshCommand(c: Challenge): string {
  return `${saveCommand(c)}\nssh-keygen -Y sign -n ${c.namespace} -f ~/.ssh/id_ed25519 challenge.txt\ncat challenge.txt.sig`;
}

export function gpgCommand(c: Challenge): string {
  return `${saveCommand(c)}\ngpg --clearsign challenge.txt\ncat challenge.txt.asc`;
}

export function LoginPage(props: { onLogin: (login: Login) => void }) {
  const [asn, setAsn] = useState('');
  const [challenge, setChallenge] = useState<Challenge>();
  const [signature, setSignature] = useState('');
  const [publicKey, setPublicKey] = useState('');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const asnNumber = Number(asn.trim().replace(/^AS/i, ''));

  const ask = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      setChallenge(await api.challenge(asnNumber));
      setSignature('');
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const verify = async (e: Event) => {
    e.preventDefault();
    if (!challenge) return;
    setError(undefined);
    setBusy(true);
    try {
      const answer = await api.verify(
        challenge.asn,
        challenge.challenge,
        signature,
        publicKey.trim() || undefined,
      );
      props.onLogin({ ...answer, asn: challenge.asn });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const pgpFingerprint = challenge?.methods.find((m) => m.type === 'pgp-fingerprint');

  return (
    <section aria-labelledby="login-title">
      <h1 id="login-title">{t('login.title')}</h1>
      <p>{t('login.intro')}</p>
      <form onSubmit={ask} class="inline-form">
        <Field id="login-asn" label={t('login.asn')} hint={t('login.asnHint')}>
          <input
            {...described('login-asn', true, undefined)}
            inputMode="numeric"
            autoComplete="username"
            value={asn}
            onInput={(e) => setAsn(e.currentTarget.value)}
            required
          />
        </Field>
        <button type="submit" disabled={busy || !Number.isInteger(asnNumber) || asnNumber <= 0}>
          {challenge ? t('login.newChallenge') : t('login.getChallenge')}
        </button>
      </form>
      {challenge && (
        <form onSubmit={verify} class="stack">
          <h2>{t('login.step2')}</h2>
          <p>{t('login.challengeIntro', { expires: new Date(challenge.expiresAt).toLocaleTimeString() })}</p>
          <pre class="code" tabIndex={0} data-testid="challenge" aria-label={t('login.challengeLabel')}>
            {challenge.challenge}
          </pre>
          <div class="buttons">
            <CopyButton text={challenge.challenge} label={t('login.copyChallenge')} />
            <DownloadButton name="challenge.txt" text={challenge.challenge} />
          </div>
          <h3>{t('login.withSsh')}</h3>
          <pre class="code" tabIndex={0} data-testid="ssh-command">
            {sshCommand(challenge)}
          </pre>
          <CopyButton text={sshCommand(challenge)} />
          <h3>{t('login.withGpg')}</h3>
          <pre class="code" tabIndex={0} data-testid="gpg-command">
            {gpgCommand(challenge)}
          </pre>
          <CopyButton text={gpgCommand(challenge)} />
          <p class="hint">{t('login.keys', { count: challenge.methods.length })}</p>
          <ul class="keys">
            {challenge.methods.map((m, i) => (
              <li key={i}>
                <code>{m.type}</code> {m.mntner}{' '}
                <code class="wrap">{(m.key ?? m.fingerprint ?? m.keyCert ?? '').slice(0, 40)}</code>
              </li>
            ))}
          </ul>
          <Field id="login-signature" label={t('login.signature')} hint={t('login.signatureHint')}>
            <textarea
              {...described('login-signature', true, undefined)}
              rows={8}
              spellcheck={false}
              value={signature}
              onInput={(e) => setSignature(e.currentTarget.value)}
              required
            />
          </Field>
          {pgpFingerprint && (
            <Field
              id="login-publickey"
              label={t('login.publicKey')}
              hint={t('login.publicKeyHint', { fingerprint: pgpFingerprint.fingerprint ?? '' })}
            >
              <textarea
                {...described('login-publickey', true, undefined)}
                rows={4}
                spellcheck={false}
                value={publicKey}
                onInput={(e) => setPublicKey(e.currentTarget.value)}
              />
            </Field>
          )}
          <p class="hint">{t('login.tokenNote')}</p>
          <button type="submit" disabled={busy || !signature.trim()}>
            {t('login.submit')}
          </button>
        </form>
      )}
      <Problem error={error} />
    </section>
  );
}
