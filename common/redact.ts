/**
 * Credentials out of URLs peerops shows (start-up errors, docs/operator-guide.md): the user and
 * password part `user:token@` becomes `***@`, whether or not the rest of the URL parses.
 */

/**
 * One value meant as a URL, which may not parse: everything between the scheme's `//` (or the start)
 * and the last `@` is redacted, since a password that breaks the URL (a space, a `/`) may hold any
 * character but the `@` that ends it. A value without `@` is shown as it is.
 */
export function redactUrl(value: string): string {
  const at = value.lastIndexOf('@');
  if (at < 0) return value;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(value)?.[0] ?? '';
  return `${scheme}***${value.slice(at)}`;
}

/** `scheme://user:secret@` anywhere in a message (an error a library wrote about a URL it was given). */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@'"<>]+@/gi;

/** A message with the credentials of every URL in it redacted. */
export function redactUrls(text: string): string {
  return text.replace(USERINFO, '$1***@');
}
