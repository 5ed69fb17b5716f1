/**
 * Message catalogues: every string the portal shows comes from here, by key. English is the reference
 * and the fallback, in the main script; each other language is a script of its own (languages/), with
 * its catalogue and that of the controller's words (problems/), fetched only when a reader needs it:
 * before the first render for a reader of it, or on a change of language (docs/decisions.md, Portal).
 * Once a language is in, `t()` answers synchronously. Each other catalogue is typed to have exactly
 * English's keys (and test/portal/catalogues.test.ts checks the same at run time, placeholders included).
 */
import type { MessageKey as ControllerKey } from '../../common/messages.ts';
import en from './en.ts';

export type MessageKey = keyof typeof en;
export type Catalogue = Record<MessageKey, string>;

/** A language's words: the portal's own, and the controller's by their message key (problems/). */
export interface Language {
  messages: Catalogue;
  problems: Readonly<Partial<Record<ControllerKey, string>>>;
}

/** Every language but English, fetched on demand: esbuild makes each a content-hashed asset. */
const FETCHED = {
  'zh-CN': () => import('./languages/zh-CN.ts'),
} satisfies Record<string, () => Promise<{ default: Language }>>;

export type Lang = 'en' | keyof typeof FETCHED;
export const LANGS: Lang[] = ['en', ...(Object.keys(FETCHED) as (keyof typeof FETCHED)[])];

// English shows the controller's messages as it sent them (problems/index.ts): no catalogue of them.
const ENGLISH: Language = { messages: en, problems: {} };

const STORAGE_KEY = 'peerops.lang';
let current: Lang = 'en';
let words: Language = ENGLISH;
// the latest change asked for: a slower fetch of an earlier choice does not undo it
let asked = 0;

/** The saved choice, else the browser's first language we have (zh-* → Simplified Chinese). */
export function initialLang(): Lang {
  const saved = safeStorage()?.getItem(STORAGE_KEY);
  if (saved && (LANGS as string[]).includes(saved)) return saved as Lang;
  for (const l of navigator.languages ?? [navigator.language]) {
    if (/^zh\b/i.test(l)) return 'zh-CN';
    if (/^en\b/i.test(l)) return 'en';
  }
  return 'en';
}

/**
 * Makes `lang` the current language once its words are in; false when a later call took over first.
 * Rejects when they cannot be fetched: the language stays as it was.
 */
export async function setLang(lang: Lang): Promise<boolean> {
  const call = ++asked;
  const fetched = lang === 'en' ? Promise.resolve(ENGLISH) : FETCHED[lang]().then((m) => m.default);
  const next = await fetched.catch((err: unknown) => {
    if (call === asked) throw err;
  });
  if (call !== asked || !next) return false;
  words = next;
  current = lang;
  document.documentElement.lang = lang;
  safeStorage()?.setItem(STORAGE_KEY, lang);
  return true;
}

export function lang(): Lang {
  return current;
}

/** The message `key` in the current language, `{name}` placeholders filled from `params`. */
export function t(key: MessageKey, params: Record<string, string | number> = {}): string {
  const text = words.messages[key] ?? en[key];
  return text.replace(/\{(\w+)\}/g, (whole, name: string) =>
    Object.hasOwn(params, name) ? String(params[name]) : whole,
  );
}

/** The controller's sentence for `key` in the current language, if its catalogue has one. */
export function problemText(key: string): string | undefined {
  return Object.hasOwn(words.problems, key) ? words.problems[key as ControllerKey] : undefined;
}

function safeStorage(): Storage | undefined {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
}
