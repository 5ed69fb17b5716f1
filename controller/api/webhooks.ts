/**
 * `POST /webhooks` (a peer's webhooks, for its own ASN's sessions) and `POST /admin/webhooks` (admins' webhooks,
 * every event; and every webhook to list or delete): list, create, delete (docs/api.md, docs/notifications.md).
 * The secret is in the create answer only. Deliveries are the notifier's (controller/notify).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import type { ProblemError } from '../../common/errors.ts';
import { type FieldError } from '../../common/errors.ts';
import { Asn, Timestamp, Uuid } from '../../common/schema.ts';
import type { Identity } from '../auth/jwt.ts';
import { EVENT_TYPES, type EventType } from '../store/core/events.ts';
import type { Webhook, WebhookRepository } from '../notify/webhooks.ts';
import { actorOf } from './actions.ts';
import { caller, requireAdmin, requireUser } from './auth.ts';
import { Actions } from './schemas.ts';
import { fieldError, problem } from '../../common/messages.ts';

/** At most this many webhooks per ASN (peers) and in all for admins: each event is a request per webhook. */
export const MAX_HOOKS_PER_OWNER = 10;

const WebhookUrl = Type.String({ minLength: 8, maxLength: 2048, pattern: '^https?://[^\\s]+$' });
const EventList = Type.Array(Type.String({ enum: [...EVENT_TYPES] }), { maxItems: EVENT_TYPES.length });

const EXAMPLE_ID = '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f';
const WebhookList = Type.Object(
  { action: Type.Literal('list') },
  { additionalProperties: false, examples: [{ action: 'list' }] },
);
const WebhookCreate = Type.Object(
  { action: Type.Literal('create'), url: WebhookUrl, events: Type.Optional(EventList) },
  {
    additionalProperties: false,
    examples: [{ action: 'create', url: 'https://hooks.example.net/peerops', events: ['session.active'] }],
  },
);
const WebhookDelete = Type.Object(
  { action: Type.Literal('delete'), id: Uuid },
  { additionalProperties: false, examples: [{ action: 'delete', id: EXAMPLE_ID }] },
);
const WebhookActions = Actions([WebhookList, WebhookCreate, WebhookDelete]);

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

/** A webhook without its secret: what a list shows. */
function record(webhook: Webhook): Static<typeof WebhookRecord> {
  const { secret: _secret, ...rest } = webhook;
  return rest;
}

/** INVALID_REQUEST for the webhook's URL, the field error's sentence in the detail. */
function urlRefused(error: FieldError): ProblemError {
  return problem('webhook.invalidUrl', { reason: error.message }, [error]);
}

/**
 * The URL must be absolute http(s), without credentials (they would be logged and shown in lists), and a
 * peer's may not name an address its deliveries would be refused (docs/notifications.md).
 */
function checkUrl(value: string, targets: WebhookTargets | undefined): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw urlRefused(fieldError('/url', 'field.notUrl'));
  }
  if (url.username || url.password) throw urlRefused(fieldError('/url', 'field.urlCredentials'));
  const problem = targets?.targetProblem(url);
  if (problem) {
    throw urlRefused(fieldError('/url', 'field.urlTarget', { host: url.hostname, reason: problem }));
  }
  return url.href;
}

/** What judges a peer's webhook target (the notifier's delivery rules). */
export interface WebhookTargets {
  targetProblem(url: URL): string | undefined;
}

export const webhookRoutes: FastifyPluginAsyncTypebox<{
  webhooks: WebhookRepository;
  targets: WebhookTargets;
}> = async (app, opts) => {
  const { webhooks, targets } = opts;

  for (const admin of [false, true]) {
    const path = admin ? '/admin/webhooks' : '/webhooks';
    // the webhooks this caller's route works on: an admin's route every webhook, a peer's its ASN's only
    const mine = (identity: Identity) => (webhook: Webhook) => admin || webhook.asn === identity.asn;
    app.post(
      path,
      {
        onRequest: [app.identify, app.rateLimit, admin ? requireAdmin : requireUser],
        schema: {
          operationId: admin ? 'adminWebhooks' : 'webhooks',
          summary: admin
            ? "Admins' webhooks (every event); list and delete every hook"
            : "Webhooks for the calling ASN's sessions",
          body: WebhookActions,
          response: { 200: Type.Union([WebhookListResponse, WebhookCreated, WebhookDeleted]) },
        },
      },
      async (request) => {
        const identity = caller(request);
        const { body } = request;
        switch (body.action) {
          case 'list':
            return { webhooks: (await webhooks.list()).filter(mine(identity)).map(record) };
          case 'create': {
            const url = checkUrl(body.url, admin ? undefined : targets);
            const asn = admin ? null : identity.asn;
            // the limit is checked inside the write, so two creates at once cannot both pass it
            const webhook = await webhooks.create(
              {
                url,
                asn,
                events: [...new Set(body.events ?? [])] as EventType[],
                createdBy: actorOf(identity).name,
              },
              (existing) => {
                if (existing.filter((h) => h.asn === asn).length >= MAX_HOOKS_PER_OWNER)
                  throw problem(asn === null ? 'webhook.limitAdmins' : 'webhook.limitAsn', {
                    max: MAX_HOOKS_PER_OWNER,
                  });
              },
            );
            request.log.info({ webhook: webhook.id, host: new URL(url).host, asn }, 'webhook created');
            return { ...record(webhook), secret: webhook.secret };
          }
          case 'delete': {
            if (!(await webhooks.delete(body.id, mine(identity))))
              throw problem('webhook.notFound', { id: body.id });
            return { id: body.id, deleted: true as const };
          }
        }
      },
    );
  }
};
