/**
 * `GET /admin/store` (docs/api.md): the store's own condition, as Kubernetes tools read conditions
 * (common/conditions.ts), and the manifests of the repository the store skips with their reasons. A
 * manifest the store cannot load never stops the controller (docs/store.md, "What the store refuses"):
 * this is where an admin sees it, beside the log line and peerops_store_manifests_skipped. With a forge,
 * also the changes forge edits replaced (docs/gitops.md), and `POST /admin/store/conflicts` to clear one.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import {
  Condition as ConditionSchema,
  ForgeConflict as ForgeConflictSchema,
  type Condition,
  type ForgeConflict,
} from '../../common/schema.ts';
import type { SkippedManifest, Store, WriteState } from '../store/store.ts';
import { actorOf } from './actions.ts';
import { caller, requireAdmin } from './auth.ts';
import { Actions } from './schemas.ts';
import { FieldErrorRecord } from './responses.ts';
import { problem } from '../../common/messages.ts';

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
        errors: Type.Array(FieldErrorRecord),
      }),
    ),
    /** Changes forge edits replaced, unresolved, of the last 7 days (a git store following a forge). */
    forgeConflicts: Type.Optional(Type.Array(ForgeConflictSchema)),
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

/**
 * `ForgeConflicts`: True (abnormal) while a change the store acknowledged and a forge edit replaced in the
 * last 7 days is not cleared; each is named with the branch that keeps it.
 */
function forgeConflictsCondition(conflicts: ForgeConflict[], since: string): Condition {
  if (conflicts.length === 0)
    return {
      type: 'ForgeConflicts',
      status: 'False',
      reason: 'NoneReplaced',
      message: 'no acknowledged change was replaced by a forge edit in the last 7 days',
      lastTransitionTime: since,
    };
  const named = conflicts.slice(0, NAMED).map((c) => `${c.path} (kept on ${c.branch})`);
  const more = conflicts.length > NAMED ? ` and ${conflicts.length - NAMED} more` : '';
  return {
    type: 'ForgeConflicts',
    status: 'True',
    reason: 'ChangesReplaced',
    message:
      `${conflicts.length} acknowledged change${conflicts.length === 1 ? ' was' : 's were'} replaced by ` +
      `forge edits: ${named.join(', ')}${more}; restore from the branch, then clear`,
    lastTransitionTime: conflicts[0]?.detectedAt ?? since,
  };
}

const ClearConflict = Type.Object(
  {
    action: Type.Literal('clear'),
    id: Type.String({ pattern: '^[0-9a-f]{12}$', description: 'the conflict, as GET /admin/store lists it' }),
  },
  { additionalProperties: false },
);

/**
 * `Writable`: True while the store takes writes; False with why while its data directory is read-only or
 * its disk refuses writes (docs/store.md, "Crash safety"). Only a store that can tell (the git store).
 */
function writableCondition(state: WriteState): Condition {
  if (state.problem === undefined)
    return {
      type: 'Writable',
      status: 'True',
      reason: 'WritesAccepted',
      message: 'the store takes writes',
      lastTransitionTime: state.since,
    };
  return {
    type: 'Writable',
    status: 'False',
    reason: state.problem.reason,
    message: `${state.problem.message}: reads and agents' polls are served, writes answer 503 STORE_UNAVAILABLE`,
    lastTransitionTime: state.since,
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
    async () => answer(),
  );

  function answer(): StoreStatusAnswer {
    const { manifests, since } = store.skippedManifests?.() ?? { manifests: [], since: started };
    const writable = store.writeState?.();
    const conflicts = store.forgeConflicts?.();
    return {
      backend: store.backend,
      conditions: [
        manifestsCondition(manifests, since),
        ...(writable ? [writableCondition(writable)] : []),
        ...(conflicts ? [forgeConflictsCondition(conflicts, started)] : []),
      ],
      skippedManifests: manifests,
      ...(conflicts ? { forgeConflicts: conflicts } : {}),
    };
  }

  app.post(
    '/admin/store/conflicts',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      schema: {
        operationId: 'adminStoreConflicts',
        summary: "Clear a forge conflict: an admin restored the kept version, or chose the forge's",
        description:
          'The conflict is no longer listed and the ForgeConflicts condition no longer counts it; its kept ' +
          'branch stays on the forge. Answers, once the clearing is stored, as GET /admin/store.',
        body: Actions([ClearConflict]),
        response: { 200: StoreStatus },
      },
    },
    async (request) => {
      if (!store.clearForgeConflict) throw problem('forge.noConflicts', { backend: store.backend });
      await store.clearForgeConflict(request.body.id, actorOf(caller(request)));
      request.log.info({ conflict: request.body.id }, 'forge conflict cleared');
      return answer();
    },
  );
};
