/** Small pieces the pages share: fields with their API message, problem boxes, copy and download. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.ts';
import { t } from './i18n/index.ts';

/** A labelled input; `error` is the API's message for this field, shown under it and tied to it. */
export function Field(props: {
  id: string;
  label: string;
  hint?: string;
  error?: string | undefined;
  children: ComponentChildren;
}) {
  return (
    <div class={`field${props.error ? ' has-error' : ''}`}>
      <label for={props.id}>{props.label}</label>
      {props.children}
      {props.hint && (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      )}
      {props.error && (
        <p class="field-error" id={`${props.id}-error`} role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

/**
 * A session form's MP-BGP and extended next hop choices (extended next hop needs MP-BGP), with the field
 * error of either.
 */
export function BgpOptions(props: {
  mpbgp: boolean;
  extendedNextHop: boolean;
  error: string | undefined;
  onChange: (change: { mpbgp: boolean } | { extendedNextHop: boolean }) => void;
}) {
  return (
    <div class="checks">
      <label>
        <input
          type="checkbox"
          checked={props.mpbgp}
          onChange={(e) => props.onChange({ mpbgp: e.currentTarget.checked })}
        />{' '}
        {t('field.mpbgp')}
      </label>
      <label>
        <input
          type="checkbox"
          checked={props.mpbgp && props.extendedNextHop}
          disabled={!props.mpbgp}
          onChange={(e) => props.onChange({ extendedNextHop: e.currentTarget.checked })}
        />{' '}
        {t('field.extendedNextHop')}
      </label>
      {props.error && (
        <p class="field-error" role="alert">
          {props.error}
        </p>
      )}
    </div>
  );
}

/** `aria-describedby` and `aria-invalid` of an input inside Field. */
export function described(id: string, hint: boolean, error: string | undefined) {
  const ids = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ');
  return { id, 'aria-describedby': ids || undefined, 'aria-invalid': error ? true : undefined };
}

/**
 * Focus after a navigation or a submit (WAI-ARIA Authoring Practices, "Developing a Keyboard Interface"):
 * the main region's first heading, so that a screen reader reads where the user is.
 */
export function focusHeading(): void {
  const heading = document.querySelector<HTMLElement>('main h1');
  if (!heading) return;
  heading.tabIndex = -1;
  heading.focus();
}

/** After a refused submit: the first field the API named, or else the problem box, inside `within`. */
export function focusFirstError(within: HTMLElement | null): void {
  within?.querySelector<HTMLElement>('[aria-invalid="true"], .problem')?.focus();
}

/**
 * An API failure in words: the problem code and the controller's detail in the reader's language. A form
 * that shows field errors beside their fields passes their pointers as `fields`: an answer whose errors
 * are all there is said there alone, not again as a pointer and a sentence under the form.
 */
export function Problem(props: { error: unknown; fields?: readonly string[] }) {
  if (!props.error) return null;
  const e: unknown = props.error;
  if (e instanceof ApiError && props.fields !== undefined && e.onlyAt(props.fields)) return null;
  const detail = e instanceof ApiError ? e.text() : String(e);
  const code = e instanceof ApiError ? e.code : 'ERROR';
  return (
    // focusable, so that a submit's failure can take the focus (focusFirstError)
    <div class="problem" role="alert" tabIndex={-1}>
      <strong>{t(errorKey(code))}</strong> <code>{code}</code>
      <p>{detail}</p>
    </div>
  );
}

function errorKey(code: string) {
  switch (code) {
    case 'INVALID_TOKEN':
      return 'error.invalidToken' as const;
    case 'RATE_LIMITED':
      return 'error.rateLimited' as const;
    case 'UNREACHABLE':
      return 'error.unreachable' as const;
    case 'INVALID_REQUEST':
      return 'error.invalidRequest' as const;
    default:
      return 'error.refused' as const;
  }
}

export function CopyButton(props: { text: string; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setState('copied');
    } catch {
      setState('failed');
    }
    setTimeout(() => setState('idle'), 3000);
  };
  return (
    <button type="button" class="secondary" onClick={copy}>
      {state === 'copied'
        ? t('common.copied')
        : state === 'failed'
          ? t('common.copyFailed')
          : (props.label ?? t('common.copy'))}
    </button>
  );
}

export function DownloadButton(props: { name: string; text: string }) {
  const download = () => {
    const url = URL.createObjectURL(new Blob([props.text], { type: 'text/plain' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = props.name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  return (
    <button type="button" class="secondary" onClick={download}>
      {t('common.download', { name: props.name })}
    </button>
  );
}

/** Status names of docs/api.md as a badge, with the plain words beside it. */
export function StatusBadge(props: { code: number; name: string }) {
  return <span class={`badge status-${props.code}`}>{props.name}</span>;
}

/** A router's badge: what its Ready says (common/conditions.ts routerReadiness). */
export function readinessBadge(state: 'ready' | 'notReady' | 'neverReported'): {
  class: string;
  text: string;
} {
  if (state === 'ready') return { class: 'status-1', text: t('routers.ready') };
  return { class: 'status-2', text: t(state === 'notReady' ? 'routers.notReady' : 'routers.neverReported') };
}

export function Dl(props: { items: [string, ComponentChildren][] }) {
  return (
    <dl class="facts">
      {props.items.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

/**
 * A question before an action that cannot be undone, as a modal <dialog> (WAI-ARIA Authoring Practices,
 * Dialog (Modal)): the browser keeps the focus inside and closes it on Escape; the focus starts on Cancel
 * (the safe choice) and goes back to the button that opened it.
 */
export function Confirm(props: {
  title: string;
  children: ComponentChildren;
  confirm: string;
  onConfirm: () => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    const dialog = ref.current;
    dialog?.showModal();
    dialog?.querySelector<HTMLElement>('button.secondary')?.focus();
    return () => {
      if (dialog?.open) dialog.close();
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="confirm-title" onClose={props.onClose}>
      <h2 id="confirm-title">{props.title}</h2>
      {props.children}
      <div class="buttons">
        <button type="button" class="danger" onClick={props.onConfirm}>
          {props.confirm}
        </button>
        <button type="button" class="secondary" onClick={() => ref.current?.close()}>
          {t('common.cancel')}
        </button>
      </div>
    </dialog>
  );
}

/** Previous / next through the pages of a list the controller pages (the admin table, the reviews). */
export function Pager(props: { at: number; pages: number; onPage: (page: number) => void }) {
  const { at, pages } = props;
  if (pages <= 1) return null;
  return (
    <nav class="pager" aria-label={t('table.pages')}>
      <button type="button" class="secondary" disabled={at === 0} onClick={() => props.onPage(at - 1)}>
        {t('table.previous')}
      </button>
      <span>{t('table.page', { n: at + 1, of: pages })}</span>
      <button type="button" class="secondary" disabled={at >= pages - 1} onClick={() => props.onPage(at + 1)}>
        {t('table.next')}
      </button>
    </nav>
  );
}
