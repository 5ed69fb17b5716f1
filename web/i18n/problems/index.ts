/**
 * The controller's words in the reader's language: an answer's message key (docs/api.md, Errors, Message
 * keys) rendered from these catalogues. English shows the message as sent (the catalogue's sentence,
 * sometimes with more detail); a key this portal does not know falls back to it too.
 */
import { fill, type MessageParams } from '../../../common/messages.ts';
import { lang, type Lang } from '../index.ts';
import { problemCatalogues } from './catalogues.ts';

/** Each language of the portal has its catalogue of the controller's words. */
const catalogues: Record<Lang, Record<string, string>> = problemCatalogues;

/** Anything the controller said with a key: a problem, a field error, a session's lastError. */
export interface KeyedText {
  message: string;
  key?: string | undefined;
  params?: MessageParams | undefined;
}

/** `said` in the current language. */
export function localText(said: KeyedText): string {
  const current = lang();
  if (current === 'en' || said.key === undefined) return said.message;
  const catalogue = catalogues[current];
  const text = Object.hasOwn(catalogue, said.key) ? catalogue[said.key] : undefined;
  return text === undefined ? said.message : fill(text, said.params ?? {});
}
