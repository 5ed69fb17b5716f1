/**
 * The controller's words in the reader's language: an answer's message key (docs/api.md, Errors, Message
 * keys) rendered from the current language's catalogue of them (web/i18n/index.ts). English shows the
 * message as sent (the catalogue's sentence, sometimes with more detail); a key this portal does not
 * know falls back to it too.
 */
import { fill, type MessageParams } from '../../../common/messages.ts';
import { problemText } from '../index.ts';

/** Anything the controller said with a key: a problem, a field error, a session's lastError. */
export interface KeyedText {
  message: string;
  key?: string | undefined;
  params?: MessageParams | undefined;
}

/** `said` in the current language. */
export function localText(said: KeyedText): string {
  const text = said.key === undefined ? undefined : problemText(said.key);
  return text === undefined ? said.message : fill(text, said.params ?? {});
}
