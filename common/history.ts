/**
 * A session's history as the API answers it (docs/api.md, Session history), shared by the controller,
 * the CLI and the portal.
 */
import Type, { type Static } from 'typebox';
import { Timestamp, Uuid } from './schema.ts';

export const HISTORY_RANGE_NAMES = ['24h', '7d', '30d'] as const;

export const HistoryRange = Type.Unsafe<(typeof HISTORY_RANGE_NAMES)[number]>(
  Type.String({
    enum: [...HISTORY_RANGE_NAMES],
    description: 'the last 24 hours (default), 7 days or 30 days',
    examples: ['7d'],
  }),
);

const Count = Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]);

export const HistoryPoint = Type.Object(
  {
    /** The start of the point's span. */
    at: Timestamp,
    /** Mean round-trip time in ms over the span; null: the peer did not answer. */
    rtt: Type.Union([Type.Number({ minimum: 0 }), Type.Null()]),
    /** Bytes received from the peer within the span; null: not known (the first report after a gap). */
    rxBytes: Count,
    txBytes: Count,
    /** Routes imported from the peer at the end of the span. */
    routesImported: Count,
    /** Routes exported to the peer; null from agents that do not report it. */
    routesExported: Count,
  },
  { additionalProperties: false },
);

export const SessionHistoryResponse = Type.Object(
  {
    uuid: Uuid,
    range: HistoryRange,
    /** The span each point covers. */
    stepSeconds: Type.Integer({ minimum: 60 }),
    points: Type.Array(HistoryPoint, { maxItems: 2100 }),
  },
  {
    additionalProperties: false,
    examples: [
      {
        uuid: '4d7c9a3e-1f2b-4c5d-8e9f-0a1b2c3d4e5f',
        range: '24h',
        stepSeconds: 60,
        points: [
          {
            at: '2026-01-01T12:00:00.000Z',
            rtt: 12.4,
            rxBytes: 51200,
            txBytes: 20480,
            routesImported: 12,
            routesExported: 1480,
          },
        ],
      },
    ],
  },
);

export type HistoryRangeName = (typeof HISTORY_RANGE_NAMES)[number];
export type HistoryPoint = Static<typeof HistoryPoint>;
export type SessionHistoryResponse = Static<typeof SessionHistoryResponse>;
