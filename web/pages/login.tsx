/**
 * Log in by signing a challenge (docs/login.md): the page asks for a challenge, shows it with the exact
 * commands that sign it, and takes the pasted signature. The private key stays where it is; the page
 * only ever sees the challenge and the signature.
 */
import { useState } from 'preact/hooks';
import { api, type Challenge, type ChallengeMethod, type Login } from '../api.ts';
import { CopyButton, described, DownloadButton, Field, Problem } from '../components.tsx';
import { t } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';
import { expiredText, gpgFingerprint, skippedReason } from './login-keys.ts';

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

/** One usable key: an SSH key by its start, an OpenPGP key by its fingerprint (and key-cert name). */
function MethodItem(props: { m: ChallengeMethod }) {
  const { m } = props;
  return (
    <li>
      <code>{m.keyCert ?? m.type}</code> {m.mntner}{' '}
      {m.fingerprint ? (
        <code class="fingerprint">{gpgFingerprint(m.fingerprint)}</code>
      ) : (
        <code class="wrap">{(m.key ?? '').slice(0, 40)}…</code>
      )}
      {m.expired && <span class="warn"> ({expiredText(m.expired)})</span>}
    </li>
  );
}

/** The public key field's hint: what the controller needs the key for, one sentence per reason. */
function publicKeyHint(fingerprintKey?: ChallengeMethod, renewable?: ChallengeMethod): string {
  return [
    fingerprintKey && t('login.publicKeyHint', { fingerprint: fingerprintKey.fingerprint ?? '' }),
    renewable &&
      t('login.renewedKeyHint', {
        keyCert: renewable.keyCert ?? '',
        fingerprint: renewable.fingerprint ?? '',
      }),
  ]
    .filter(Boolean)
    .join(' · ');
}

export function LoginPage(props: { onLogin: (login: Login) => void }) {
  const [asn, setAsn] = useState('');
  const [challenge, setChallenge] = useState<Challenge>();
  const [signature, setSignature] = useState('');
  const [publicKey, setPublicKey] = useState('');
  const { busy, error, run } = useAction();
  const asnNumber = Number(asn.trim().replace(/^AS/i, ''));

  const ask = (e: Event) => {
    e.preventDefault();
    return run(async () => {
      setChallenge(await api.challenge(asnNumber));
      setSignature('');
    });
  };
  const verify = (e: Event) => {
    e.preventDefault();
    if (!challenge) return;
    return run(async () => {
      const answer = await api.verify(
        challenge.asn,
        challenge.challenge,
        signature,
        publicKey.trim() || undefined,
      );
      props.onLogin({ ...answer, asn: challenge.asn });
    });
  };
  const pgpFingerprint = challenge?.methods.find((m) => m.type === 'pgp-fingerprint');
  // docs/login.md, A key-cert that expired in the registry: the renewed key goes along as publicKey
  const renewable = challenge?.methods.find((m) => m.type === 'pgp-key-cert' && m.expired);

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
          <ul class="keys" data-testid="methods">
            {challenge.methods.map((m, i) => (
              <MethodItem key={i} m={m} />
            ))}
          </ul>
          {challenge.skipped.length > 0 && (
            <>
              <p class="hint">{t('login.skipped', { count: challenge.skipped.length })}</p>
              <ul class="keys" data-testid="skipped">
                {challenge.skipped.map((s, i) => (
                  <li key={i}>
                    {s.mntner} <code class="wrap">{s.line}</code>: {skippedReason(s.reason)}
                  </li>
                ))}
              </ul>
            </>
          )}
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
          {(pgpFingerprint || renewable) && (
            <Field
              id="login-publickey"
              label={
                pgpFingerprint
                  ? t('login.publicKey')
                  : t('login.renewedKey', { keyCert: renewable?.keyCert ?? '' })
              }
              hint={publicKeyHint(pgpFingerprint, renewable)}
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
