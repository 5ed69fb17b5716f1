/**
 * `GET /session/:uuid/history` (docs/api.md, Session history): a session's RTT, traffic and route counts
 * over the last 24 hours, 7 days or 30 days, for its owner or an admin, from the controller's history
 * files (controller/history/session-history.ts) or, with `--history-prometheus`, from Prometheus
 * (controller/history/prometheus-history.ts; docs/kubernetes.md, Session history).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { HistoryRange, SessionHistoryResponse, type HistoryRangeName } from '../../common/history.ts';
import Type from 'typebox';
import type { Sample } from '../history/samples.ts';
import type { Store } from '../store/store.ts';
import { findOwned } from './actions.ts';
import { caller, requireUser } from './auth.ts';

/** Each range's length and the step its points are merged to: at most 2,016 points (7 d of 5 minutes). */
const RANGES: Record<HistoryRangeName, { minutes: number; stepMinutes: number }> = {
  '24h': { minutes: 24 * 60, stepMinutes: 1 },
  '7d': { minutes: 7 * 24 * 60, stepMinutes: 5 },
  '30d': { minutes: 30 * 24 * 60, stepMinutes: 30 },
};

/** Where a session's points come from: the embedded history files or Prometheus. */
export interface HistorySource {
  /** The session's points from `fromMinute` on, merged to `stepMinutes`, oldest first. */
  series(uuid: string, fromMinute: number, stepMinutes: number): Promise<Sample[]>;
}

export const historyRoutes: FastifyPluginAsyncTypebox<{ store: Store; history: HistorySource }> = async (
  app,
  { store, history },
) => {
  app.get(
    '/session/:uuid/history',
    {
      onRequest: [app.identify, app.rateLimit, requireUser],
      schema: {
        operationId: 'sessionHistory',
        summary: "A session's RTT, traffic and route counts over 24 h, 7 d or 30 d (its owner or an admin)",
        description:
          'Points at 1 minute (24h), 5 minutes (7d) or 30 minutes (30d), oldest first; spans with no report are left out. Bytes are those moved within the point’s span.',
        // a pattern, not the uuid format: path parameters are read by the text validator (validation.ts)
        params: Type.Object({
          uuid: Type.String({
            pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
            description: 'the session UUID',
            examples: ['4d7c9a3e-1f2b-4c5d-8e9f-0a1b2c3d4e5f'],
          }),
        }),
        querystring: Type.Object({ range: Type.Optional(HistoryRange) }),
        response: { 200: SessionHistoryResponse },
      },
    },
    async (request) => {
      const session = findOwned(store, caller(request), request.params.uuid);
      const range = request.query.range ?? '24h';
      const { minutes, stepMinutes } = RANGES[range];
      const nowMinute = Math.floor(Date.now() / 60_000);
      const samples = await history.series(session.spec.uuid, nowMinute - minutes, stepMinutes);
      return {
        uuid: session.spec.uuid,
        range,
        stepSeconds: stepMinutes * 60,
        points: samples.map((s) => ({
          at: new Date(s.minute * 60_000).toISOString(),
          rtt: s.rtt === null ? null : Math.round(s.rtt * 10) / 10,
          rxBytes: s.rxBytes,
          txBytes: s.txBytes,
          routesImported: s.routesImported,
          routesExported: s.routesExported,
        })),
      };
    },
  );
};
