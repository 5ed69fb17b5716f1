/**
 * Message catalogues: every string the portal shows comes from here, by key. English is the reference;
 * each other catalogue is typed to have exactly its keys (and test/portal/catalogues.test.ts checks the
 * same at run time, placeholders included).
 */
import en from './en.ts';
import zhCN from './zh-CN.ts';

export type MessageKey = keyof typeof en;
export type Catalogue = Record<MessageKey, string>;

export const catalogues = { en, 'zh-CN': zhCN } satisfies Record<string, Catalogue>;
export type Lang = keyof typeof catalogues;
export const LANGS = Object.keys(catalogues) as Lang[];

const STORAGE_KEY = 'peerops.lang';
let current: Lang = 'en';

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

export function setLang(lang: Lang): void {
  current = lang;
  document.documentElement.lang = lang;
  safeStorage()?.setItem(STORAGE_KEY, lang);
}

export function lang(): Lang {
  return current;
}

/** The message `key` in the current language, `{name}` placeholders filled from `params`. */
export function t(key: MessageKey, params: Record<string, string | number> = {}): string {
  const text = catalogues[current][key] ?? en[key];
  return text.replace(/\{(\w+)\}/g, (whole, name: string) =>
    Object.hasOwn(params, name) ? String(params[name]) : whole,
  );
}

function safeStorage(): Storage | undefined {
  try {
    return window.localStorage;
  } catch {
    return undefined;
  }
}
