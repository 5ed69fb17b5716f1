/**
 * The form that adds a router or edits one (docs/user-guide.md, Routers): every field of the router's
 * spec an admin writes (docs/api.md, router add and update), the API's field errors at their fields.
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, type AdminRouterRecord, type RouterFields, type RouterUpdate } from '../api.ts';
import { described, Field, focusFirstError, Problem } from '../components.tsx';
import { t, type MessageKey } from '../i18n/index.ts';
import { useAction } from '../use-action.ts';

/** The form's text of each field; `loopback.ipv4` and the port range are fields of their own here. */
interface RouterForm {
  name: string;
  displayName: string;
  nodeId: string;
  region: string;
  location: string;
  provider: string;
  dn42Region: string;
  endpointHost: string;
  publicKey: string;
  linkLocal: string;
  loopback4: string;
  loopback6: string;
  portMin: string;
  portMax: string;
  maxSessions: string;
  acceptingSessions: boolean;
  autoApprove: boolean;
}

type TextField = Exclude<keyof RouterForm, 'acceptingSessions' | 'autoApprove'>;

/** Each text field: its label, its pointer in the router's spec (where the API names it), required. */
const TEXT_FIELDS: {
  key: TextField;
  label: MessageKey;
  pointer: string;
  required?: boolean;
  hint?: MessageKey;
}[] = [
  { key: 'name', label: 'routerForm.name', pointer: '/name', required: true, hint: 'routerForm.nameHint' },
  { key: 'displayName', label: 'routerForm.displayName', pointer: '/displayName', required: true },
  {
    key: 'nodeId',
    label: 'routerForm.nodeId',
    pointer: '/nodeId',
    required: true,
    hint: 'routerForm.nodeIdHint',
  },
  {
    key: 'region',
    label: 'routers.region',
    pointer: '/region',
    required: true,
    hint: 'routerForm.regionHint',
  },
  { key: 'location', label: 'routerForm.location', pointer: '/location' },
  { key: 'provider', label: 'routerForm.provider', pointer: '/provider' },
  {
    key: 'dn42Region',
    label: 'routerForm.dn42Region',
    pointer: '/dn42Region',
    hint: 'routerForm.dn42RegionHint',
  },
  { key: 'endpointHost', label: 'routers.endpointHost', pointer: '/endpointHost', required: true },
  { key: 'publicKey', label: 'routerForm.publicKey', pointer: '/publicKey', required: true },
  { key: 'linkLocal', label: 'routerForm.linkLocal', pointer: '/linkLocal', required: true },
  { key: 'loopback4', label: 'routerForm.loopback4', pointer: '/loopback/ipv4' },
  { key: 'loopback6', label: 'routerForm.loopback6', pointer: '/loopback/ipv6' },
  { key: 'portMin', label: 'routerForm.portMin', pointer: '/portRange/min' },
  { key: 'portMax', label: 'routerForm.portMax', pointer: '/portRange/max' },
  {
    key: 'maxSessions',
    label: 'routerForm.maxSessions',
    pointer: '/maxSessions',
    hint: 'routerForm.maxSessionsHint',
  },
];

const EMPTY: RouterForm = {
  name: '',
  displayName: '',
  nodeId: '',
  region: '',
  location: '',
  provider: '',
  dn42Region: '',
  endpointHost: '',
  publicKey: '',
  linkLocal: '',
  loopback4: '',
  loopback6: '',
  portMin: '',
  portMax: '',
  maxSessions: '',
  acceptingSessions: true,
  autoApprove: false,
};

function formOf(r: AdminRouterRecord): RouterForm {
  const s = r.spec;
  return {
    name: r.name,
    displayName: s.displayName,
    nodeId: String(s.nodeId),
    region: s.region,
    location: s.location ?? '',
    provider: s.provider ?? '',
    dn42Region: s.dn42Region ?? '',
    endpointHost: s.endpointHost,
    publicKey: s.publicKey,
    linkLocal: s.linkLocal,
    loopback4: s.loopback.ipv4 ?? '',
    loopback6: s.loopback.ipv6 ?? '',
    portMin: s.portRange ? String(s.portRange.min) : '',
    portMax: s.portRange ? String(s.portRange.max) : '',
    maxSessions: s.maxSessions === undefined ? '' : String(s.maxSessions),
    acceptingSessions: s.acceptingSessions !== false,
    autoApprove: s.autoApprove === true,
  };
}

/**
 * The spec the form says. A number field holds what was typed when it is not a number, so that the API
 * names it; a blank optional field is left out (on update: kept as stored).
 */
function specOf(f: RouterForm): RouterFields {
  const num = (v: string) => (v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : v.trim());
  const spec: Record<string, unknown> = {
    displayName: f.displayName.trim(),
    nodeId: num(f.nodeId),
    region: f.region.trim(),
    endpointHost: f.endpointHost.trim(),
    publicKey: f.publicKey.trim(),
    linkLocal: f.linkLocal.trim(),
    loopback: {
      ...(f.loopback4.trim() ? { ipv4: f.loopback4.trim() } : {}),
      ...(f.loopback6.trim() ? { ipv6: f.loopback6.trim() } : {}),
    },
    acceptingSessions: f.acceptingSessions,
    autoApprove: f.autoApprove,
  };
  for (const k of ['location', 'provider', 'dn42Region'] as const) if (f[k].trim()) spec[k] = f[k].trim();
  if (f.portMin.trim() || f.portMax.trim()) spec.portRange = { min: num(f.portMin), max: num(f.portMax) };
  if (f.maxSessions.trim()) spec.maxSessions = num(f.maxSessions);
  return spec as RouterFields;
}

/**
 * The fields of `next` that differ from `before`: what update sends. An optional field emptied is null,
 * which clears it (docs/api.md, router update).
 */
function changed(before: RouterFields, next: RouterFields): RouterUpdate {
  const stored: Record<string, unknown> = before;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(next)) if (JSON.stringify(v) !== JSON.stringify(stored[k])) out[k] = v;
  for (const k of Object.keys(stored)) if (!Object.hasOwn(next, k)) out[k] = null;
  return out;
}

/**
 * Add (no `router`) or edit one router. The API's field errors show at their fields: pointers into the
 * body on add (`/publicKey`), into `spec` on update (`/spec/publicKey`).
 */
export function RouterEditor(props: {
  router?: AdminRouterRecord;
  onSaved: (answer: { name: string; agentToken?: string }) => void;
  onCancel: () => void;
}) {
  const editing = props.router;
  const [form, setForm] = useState<RouterForm>(() => (editing ? formOf(editing) : EMPTY));
  const { busy, error, run } = useAction();
  const [unchanged, setUnchanged] = useState(false);
  const formRef = useRef<HTMLFormElement>(null);
  const id = editing ? `edit-${editing.name}` : 'add-router';
  useEffect(() => {
    if (error) focusFirstError(formRef.current);
  }, [error]);
  // before the first paint: a key typed as soon as the form shows goes to the field it lands in, not to
  // one the focus moves away from a frame later
  useLayoutEffect(() => {
    formRef.current?.querySelector<HTMLElement>('input')?.focus();
  }, []);
  const set = <K extends keyof RouterForm>(k: K, v: RouterForm[K]) => setForm({ ...form, [k]: v });
  const apiPointer = (pointer: string) => (editing && pointer !== '/name' ? `/spec${pointer}` : pointer);
  const fieldError = (pointer: string) =>
    error instanceof ApiError ? error.field(apiPointer(pointer)) || undefined : undefined;
  // a router's name is fixed once it exists
  const fields = TEXT_FIELDS.filter((f) => !(editing && f.key === 'name'));
  const submit = (e: Event) => {
    e.preventDefault();
    setUnchanged(false);
    const spec = specOf(form);
    return run(async () => {
      if (editing) {
        const patch = changed(specOf(formOf(editing)), spec);
        if (Object.keys(patch).length === 0) {
          setUnchanged(true);
          return;
        }
        await api.updateRouter(editing.name, patch);
        props.onSaved({ name: editing.name });
      } else {
        const answer = await api.addRouter(form.name.trim(), spec);
        props.onSaved({ name: answer.router.name, agentToken: answer.agentToken });
      }
    });
  };
  return (
    <form
      // Escape closes the form as it does a session's Change form (docs/user-guide.md, Keyboard)
      onKeyDown={(e) => e.key === 'Escape' && props.onCancel()}
      class="stack router-form"
      onSubmit={submit}
      noValidate
      ref={formRef}
      aria-labelledby={`${id}-title`}
    >
      <h2 id={`${id}-title`}>
        {editing ? t('routerForm.editTitle', { name: editing.name }) : t('routerForm.addTitle')}
      </h2>
      <div class="field-grid">
        {fields.map((f) => {
          const err = fieldError(f.pointer);
          const fid = `${id}-${f.key}`;
          return (
            <Field
              key={f.key}
              id={fid}
              label={f.required ? t(f.label) : t('routerForm.optional', { label: t(f.label) })}
              {...(f.hint ? { hint: t(f.hint) } : {})}
              error={err}
            >
              <input
                {...described(fid, f.hint !== undefined, err)}
                value={form[f.key]}
                required={f.required}
                onInput={(e) => set(f.key, e.currentTarget.value)}
              />
            </Field>
          );
        })}
      </div>
      <div class="checks">
        <label>
          <input
            type="checkbox"
            checked={form.acceptingSessions}
            onChange={(e) => set('acceptingSessions', e.currentTarget.checked)}
          />{' '}
          {t('routerForm.accepting')}
        </label>
        <label>
          <input
            type="checkbox"
            checked={form.autoApprove}
            onChange={(e) => set('autoApprove', e.currentTarget.checked)}
          />{' '}
          {t('routerForm.autoApprove')}
        </label>
      </div>
      {editing && <p class="hint">{t('routerForm.clearHint')}</p>}
      <Problem error={error} fields={fields.map((f) => apiPointer(f.pointer))} />
      {unchanged && (
        <p class="problem" role="alert" tabIndex={-1}>
          {t('routerForm.unchanged')}
        </p>
      )}
      <div class="buttons">
        <button type="submit" disabled={busy}>
          {editing ? t('routerForm.save') : t('routerForm.add')}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          {t('common.cancel')}
        </button>
      </div>
    </form>
  );
}
