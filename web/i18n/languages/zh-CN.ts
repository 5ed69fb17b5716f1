/**
 * Simplified Chinese as one asset of its own: the portal's catalogue and that of the controller's words,
 * fetched only for a reader who reads it (web/i18n/index.ts; docs/decisions.md, Portal).
 */
import problems from '../problems/zh-CN.ts';
import messages from '../zh-CN.ts';

// typed where it is imported (FETCHED in web/i18n/index.ts), which the tests' DOM-less TypeScript skips
export default { messages, problems };
