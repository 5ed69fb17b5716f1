/**
 * `POST /webhooks` (a peer's hooks, for its own ASN's sessions) and `POST /admin/webhooks` (admins' hooks,
 * every event; and every hook to list or delete): list, create, delete (docs/api.md, docs/notifications.md).
 * The secret is in the create answer only. Deliveries are the notifier's (controller/notify).
 */
import type { FastifyInstance } from 'fastify';
import Type, { type Static } from 'typebox';
import { ProblemError } from '../../common/errors.ts';
import { Asn, Timestamp, Uuid } from '../../common/schema.ts';
import type { Identity } from '../auth/jwt.ts';
import { EVENT_TYPES, type EventType } from '../notify/events.ts';
import type { Webhook, WebhookRepository } from '../notify/hooks.ts';
import { actorOf, parseAction } from './actions.ts';
import { requireAdmin, requireUser } from './auth.ts';

/** At most this many hooks per ASN (peers) and in all for admins: each event is a request per hook. */
export const MAX_HOOKS_PER_OWNER = 10;

const WebhookUrl = Type.String({ minLength: 8, maxLength: 2048, pattern: '^https?://[^\\s]+$' });
const EventList = Type.Array(Type.String({ enum: [...EVENT_TYPES] }), { maxItems: EVENT_TYPES.length });

const WebhookList = Type.Object({ action: Type.Literal('list') }, { additionalProperties: false });
const WebhookCreate = Type.Object(
  { action: Type.Literal('create'), url: WebhookUrl, events: Type.Optional(EventList) },
  { additionalProperties: false },
);
const WebhookDelete = Type.Object(
  { action: Type.Literal('delete'), id: Uuid },
  { additionalProperties: false },
);
const WEBHOOK_ACTIONS = { list: WebhookList, create: WebhookCreate, delete: WebhookDelete };
type Body = Static<typeof WebhookList> | Static<typeof WebhookCreate> | Static<typeof WebhookDelete>;

const WebhookRecord = Type.Object({
  id: Uuid,
  url: Type.String(),
  asn: Type.Union([Asn, Type.Null()]),
  events: EventList,
  createdAt: Timestamp,
  createdBy: Type.String(),
});
const WebhookCreated = Type.Object({ ...WebhookRecord.properties, secret: Type.String() });
const WebhookListResponse = Type.Object({ webhooks: Type.Array(WebhookRecord) });
const WebhookDeleted = Type.Object({ id: Uuid, deleted: Type.Literal(true) });
const RESPONSES = { list: WebhookListResponse, create: WebhookCreated, delete: WebhookDeleted };

/** A hook without its secret: what a list shows. */
function record(hook: Webhook): Static<typeof WebhookRecord> {
  const { secret: _secret, ...rest } = hook;
  return rest;
}

/** The URL must be absolute http(s), without credentials (they would be logged and shown in lists). */
function checkUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ProblemError('INVALID_REQUEST', '/url: not a URL', [{ pointer: '/url', message: 'not a URL' }]);
  }
  if (url.username || url.password)
    throw new ProblemError('INVALID_REQUEST', '/url: must not hold a user name or password', [
      { pointer: '/url', message: 'must not hold a user name or password; authenticate by the signature' },
    ]);
  return url.href;
}

export async function webhookRoutes(app: FastifyInstance, opts: { hooks: WebhookRepository }): Promise<void> {
  const { hooks } = opts;

  for (const admin of [false, true]) {
    const path = admin ? '/admin/webhooks' : '/webhooks';
    // the hooks this caller's route works on: an admin's route every hook, a peer's its ASN's only
    const mine = (identity: Identity) => (hook: Webhook) => admin || hook.asn === identity.asn;
    app.post(
      path,
      {
        preHandler: admin ? requireAdmin : requireUser,
        // the body is checked by parseAction below, whose problems name the field (docs/api.md, Errors)
        attachValidation: true,
        schema: {
          operationId: admin ? 'adminWebhooks' : 'webhooks',
          summary: admin
            ? "Admins' webhooks (every event); list and delete every hook"
            : "Webhooks for the calling ASN's sessions",
          // One object, not a union of the actions: fastify's ajv (removeAdditional) would strip a union's
          // fields of every branch but the first. parseAction checks each action exactly.
          body: Type.Object({
            action: Type.String({ enum: Object.keys(WEBHOOK_ACTIONS) }),
            url: Type.Optional(WebhookUrl),
            events: Type.Optional(EventList),
            id: Type.Optional(Uuid),
          }),
          response: { 200: Type.Union([WebhookListResponse, WebhookCreated, WebhookDeleted]) },
        },
        config: {
          docs: {
            summary: admin
              ? "Admins' webhooks (every event); list and delete every hook"
              : "Webhooks for the calling ASN's sessions",
            auth: admin ? 'admin' : 'user',
            actions: WEBHOOK_ACTIONS,
            responses: RESPONSES,
          },
        },
      },
      async (request) => {
        const identity = request.identity as Identity;
        const body = parseAction<Body>(request.body, WEBHOOK_ACTIONS);
        switch (body.action) {
          case 'list':
            return { webhooks: (await hooks.list()).filter(mine(identity)).map(record) };
          case 'create': {
            const url = checkUrl(body.url);
            const asn = admin ? null : identity.asn;
            // the limit is checked inside the write, so two creates at once cannot both pass it
            const hook = await hooks.create(
              {
                url,
                asn,
                events: [...new Set(body.events ?? [])] as EventType[],
                createdBy: actorOf(identity).name,
              },
              (existing) => {
                if (existing.filter((h) => h.asn === asn).length >= MAX_HOOKS_PER_OWNER)
                  throw new ProblemError(
                    'CONFLICT',
                    `at most ${MAX_HOOKS_PER_OWNER} webhooks ${asn === null ? 'for admins' : 'per ASN'}; delete one first`,
                  );
              },
            );
            request.log.info({ webhook: hook.id, host: new URL(url).host, asn }, 'webhook created');
            return { ...record(hook), secret: hook.secret };
          }
          case 'delete': {
            if (!(await hooks.delete(body.id, mine(identity))))
              throw new ProblemError('NOT_FOUND', `no webhook ${body.id}`);
            return { id: body.id, deleted: true as const };
          }
        }
      },
    );
  }
}
