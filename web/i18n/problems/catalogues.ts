/**
 * The portal's catalogues of the controller's words, one per language of the portal (web/i18n/): every
 * key common/messages.ts lists (test/portal/problem-catalogues.test.ts).
 */
import type { MessageKey } from '../../../common/messages.ts';
import en from './en.ts';
import zhCN from './zh-CN.ts';

export const problemCatalogues: Record<'en' | 'zh-CN', Record<MessageKey, string>> = { en, 'zh-CN': zhCN };
