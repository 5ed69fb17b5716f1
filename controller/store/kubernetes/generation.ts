/**
 * The status a session write sends, stamped with the generation the object will have once written. A
 * PeeringSession has no status subresource (docs/kubernetes.md, "One write per change"), so the API
 * server raises metadata.generation on any change outside metadata, status included: a write that
 * changes spec or status is generation + 1, one that changes neither keeps it. Stamping that number
 * keeps status.observedGeneration equal to metadata.generation after every write of the controller, as
 * kstatus, Flux and `kubectl wait` read it (docs/kubernetes.md, Conditions).
 */
import { isDeepStrictEqual } from 'node:util';
import { atGeneration } from '../../../common/conditions.ts';
import type { SessionSpec, SessionStatusRecord } from '../../../common/schema.ts';

interface Stored {
  metadata: { generation?: number };
  spec: SessionSpec;
  status?: unknown;
}

/** As the API server stores it: without undefined fields. */
const stored = (value: unknown): unknown =>
  value === undefined ? undefined : JSON.parse(JSON.stringify(value));

/** `status` at the generation the object will have once `spec` and it are written over `current`. */
export function stampedStatus(
  current: Stored,
  spec: SessionSpec,
  status: SessionStatusRecord,
): SessionStatusRecord & { observedGeneration?: number } {
  const generation = current.metadata.generation ?? 1;
  const same = atGeneration(status, generation);
  const unchanged =
    isDeepStrictEqual(stored(spec), stored(current.spec)) &&
    isDeepStrictEqual(stored(same), stored(current.status));
  return unchanged ? same : atGeneration(status, generation + 1);
}
