/**
 * The routing policy (docs/user-guide.md, The policy): the default or a router's override as stored, and
 * editing it as `peerops admin policy set` does, with the change shown line by line (current vs edited)
 * before it is saved (docs/api.md, Admin API, policy set).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type PolicyRecord } from '../api.ts';
import { described, Field, focusFirstError, focusHeading, Problem } from '../components.tsx';
import { lineDiff, type DiffLine } from '../line-diff.ts';
import { t } from '../i18n/index.ts';

/** The policy as the page shows and edits it: JSON, two spaces, in the stored order. */
const text = (spec: unknown) => JSON.stringify(spec, null, 2);

type Step = { at: 'view' } | { at: 'edit' } | { at: 'review'; spec: unknown; diff: DiffLine[] };

export function PolicyPage() {
  const [name, setName] = useState('default');
  const [routers, setRouters] = useState<string[]>([]);
  const [policy, setPolicy] = useState<PolicyRecord>();
  const [error, setError] = useState<unknown>();
  const [step, setStep] = useState<Step>({ at: 'view' });
  const [draft, setDraft] = useState('');
  const [draftError, setDraftError] = useState<string>();
  const [saveError, setSaveError] = useState<unknown>();
  const [saved, setSaved] = useState(false);
  const pageRef = useRef<HTMLElement>(null);

  const load = async (which: string) => {
    setPolicy(undefined);
    try {
      setPolicy(await api.policy(which));
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => {
    void load(name);
  }, [name]);
  useEffect(() => {
    api
      .adminRouters()
      .then((r) => setRouters(r.routers.map((x) => x.name)))
      .catch(() => undefined); // the default policy is still there to read and edit
  }, []);
  // each step's focus: the diff's heading, the editor, or the first error (docs/user-guide.md, Keyboard)
  useEffect(() => {
    if (step.at === 'review') document.getElementById('policy-diff-title')?.focus();
    if (step.at === 'edit') document.getElementById('policy-text')?.focus();
  }, [step.at]);
  useEffect(() => {
    if (draftError || saveError) focusFirstError(pageRef.current);
  }, [draftError, saveError]);

  const edit = () => {
    setSaved(false);
    setSaveError(undefined);
    setDraft(text(policy?.spec ?? {}));
    setStep({ at: 'edit' });
  };
  const review = (e: Event) => {
    e.preventDefault();
    setDraftError(undefined);
    setSaveError(undefined);
    let spec: unknown;
    try {
      spec = JSON.parse(draft);
    } catch {
      return setDraftError(t('policy.badJson'));
    }
    if (spec === null || typeof spec !== 'object' || Array.isArray(spec))
      return setDraftError(t('policy.notObject'));
    const diff = lineDiff(text(policy?.spec ?? {}), text(spec));
    if (diff.every((l) => l.kind === 'same')) return setDraftError(t('policy.unchanged'));
    setStep({ at: 'review', spec, diff });
  };
  const save = async () => {
    if (step.at !== 'review') return;
    setSaveError(undefined);
    try {
      setPolicy(await api.setPolicy(name, step.spec));
      setSaved(true);
      setStep({ at: 'view' });
      focusHeading();
    } catch (err) {
      setSaveError(err);
    }
  };
  const fieldErrors = saveError instanceof ApiError ? saveError.field('/spec') : undefined;
  const removed = step.at === 'review' ? step.diff.filter((l) => l.kind === 'removed').length : 0;
  const added = step.at === 'review' ? step.diff.filter((l) => l.kind === 'added').length : 0;

  return (
    <section aria-labelledby="policy-title" ref={pageRef}>
      <h1 id="policy-title">{t('policy.title')}</h1>
      <p>{t('policy.intro')}</p>
      <div class="field">
        <label for="policy-name">{t('policy.which')}</label>
        <select
          id="policy-name"
          value={name}
          disabled={step.at !== 'view'}
          onChange={(e) => {
            setSaved(false);
            setName(e.currentTarget.value);
          }}
        >
          <option value="default">{t('policy.default')}</option>
          {routers.map((r) => (
            <option key={r} value={r}>
              {t('policy.override', { router: r })}
            </option>
          ))}
        </select>
      </div>
      <p class="notice" role="status" data-testid="policy-saved">
        {saved && t('policy.saved')}
      </p>
      <Problem error={error} />
      {policy === undefined && !error && <p>{t('common.loading')}</p>}
      {policy && step.at === 'view' && (
        <>
          <pre class="code" tabIndex={0} aria-label={t('policy.current')}>
            {text(policy.spec)}
          </pre>
          <div class="buttons">
            <button type="button" onClick={edit}>
              {t('policy.edit')}
            </button>
          </div>
        </>
      )}
      {step.at === 'edit' && (
        <form class="stack" onSubmit={review} noValidate>
          <Field
            id="policy-text"
            label={t('policy.editLabel')}
            hint={t('policy.editHint')}
            error={draftError}
          >
            <textarea
              {...described('policy-text', true, draftError)}
              class="code"
              rows={Math.min(30, draft.split('\n').length + 2)}
              spellcheck={false}
              value={draft}
              onInput={(e) => setDraft(e.currentTarget.value)}
            />
          </Field>
          <div class="buttons">
            <button type="submit">{t('policy.review')}</button>
            <button
              type="button"
              class="secondary"
              onClick={() => {
                setDraftError(undefined);
                setStep({ at: 'view' });
              }}
            >
              {t('common.cancel')}
            </button>
          </div>
        </form>
      )}
      {step.at === 'review' && (
        <div class="stack">
          <h2 id="policy-diff-title" tabIndex={-1}>
            {t('policy.diffTitle')}
          </h2>
          <p>{t('policy.diffSummary', { removed, added })}</p>
          <pre class="code diff" tabIndex={0} aria-label={t('policy.diffTitle')} data-testid="policy-diff">
            {step.diff.map((l, i) => (
              <span key={i} class={`diff-${l.kind}`}>
                {l.kind === 'removed' ? '- ' : l.kind === 'added' ? '+ ' : '  '}
                {l.text}
                {'\n'}
              </span>
            ))}
          </pre>
          <Problem error={saveError} />
          {fieldErrors && (
            <p class="field-error" role="alert">
              {fieldErrors}
            </p>
          )}
          <div class="buttons">
            <button type="button" onClick={save}>
              {t('policy.save')}
            </button>
            <button type="button" class="secondary" onClick={() => setStep({ at: 'edit' })}>
              {t('policy.back')}
            </button>
          </div>
        </div>
      )}
    </section>
  );
}
