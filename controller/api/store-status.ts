/**
 * `GET /admin/store` (docs/api.md): the store's own condition, as Kubernetes tools read conditions
 * (common/conditions.ts), and the manifests of the repository the store skips with their reasons. A
 * manifest the store cannot load never stops the controller (docs/store.md, "What the store refuses"):
 * this is where an admin sees it, beside the log line and peerops_store_manifests_skipped.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import { Condition as ConditionSchema, type Condition } from '../../common/schema.ts';
import type { SkippedManifest, Store } from '../store/store.ts';
import { requireAdmin } from './auth.ts';

/** At most this many paths in the condition's message; the list has them all. */
const NAMED = 5;

const StoreStatus = Type.Object(
  {
    backend: Type.Union([Type.Literal('git'), Type.Literal('kubernetes')]),
    conditions: Type.Array(ConditionSchema),
    skippedManifests: Type.Array(
      Type.Object({
        path: Type.String(),
        reason: Type.String(),
        errors: Type.Array(Type.Object({ pointer: Type.String(), message: Type.String() })),
      }),
    ),
  },
  {
    examples: [
      {
        backend: 'git',
        conditions: [
          {
            type: 'ManifestsApplied',
            status: 'False',
            reason: 'ManifestsSkipped',
            message: '1 manifest skipped: sessions/fra1/as4242420099.yaml (anchors)',
            lastTransitionTime: '2026-11-27T23:00:00.000Z',
          },
        ],
        skippedManifests: [
          {
            path: 'sessions/fra1/as4242420099.yaml',
            reason: 'anchors',
            errors: [
              {
                pointer: '/',
                message:
                  'line 5: YAML anchor &a0: anchors and aliases are not allowed, a manifest spells out every value',
              },
            ],
          },
        ],
      },
    ],
  },
);

/** The answer of GET /admin/store, as `peerops admin store status` reads it. */
export type StoreStatusAnswer = Static<typeof StoreStatus>;

/** `ManifestsApplied`: True while the store applies every manifest of its repository. */
function manifestsCondition(skipped: SkippedManifest[], since: string): Condition {
  if (skipped.length === 0)
    return {
      type: 'ManifestsApplied',
      status: 'True',
      reason: 'AllApplied',
      message: 'the store applies every manifest of its repository',
      lastTransitionTime: since,
    };
  const named = skipped.slice(0, NAMED).map((m) => `${m.path} (${m.reason})`);
  const more = skipped.length > NAMED ? ` and ${skipped.length - NAMED} more` : '';
  return {
    type: 'ManifestsApplied',
    status: 'False',
    reason: 'ManifestsSkipped',
    message: `${skipped.length} manifest${skipped.length === 1 ? '' : 's'} skipped: ${named.join(', ')}${more}`,
    lastTransitionTime: since,
  };
}

export const storeStatusRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, opts) => {
  const { store } = opts;
  // a store without skippedManifests skips nothing: it applies all it is given since the start
  const started = new Date().toISOString();
  app.get(
    '/admin/store',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      schema: {
        operationId: 'adminStore',
        summary: "The store's condition and the manifests of its repository it skips, with why",
        response: { 200: StoreStatus },
      },
    },
    async () => {
      const { manifests, since } = store.skippedManifests?.() ?? { manifests: [], since: started };
      return {
        backend: store.backend,
        conditions: [manifestsCondition(manifests, since)],
        skippedManifests: manifests,
      };
    },
  );
};
