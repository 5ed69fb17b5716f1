/**
 * English: the controller's own catalogue (common/messages.ts), the reference the other languages follow.
 * The portal shows an English answer's message as sent: it is this text, sometimes with more detail.
 */
import {
  CONDITION_MESSAGES,
  FIELD_MESSAGES,
  LAST_ERRORS,
  REFUSALS,
  type MessageKey,
} from '../../../common/messages.ts';

const refusals = Object.entries(REFUSALS).map(([key, entry]) => [key, entry.text]);

export default Object.fromEntries([
  ...refusals,
  ...Object.entries(FIELD_MESSAGES),
  ...Object.entries(LAST_ERRORS),
  ...Object.entries(CONDITION_MESSAGES),
]) as Record<MessageKey, string>;
