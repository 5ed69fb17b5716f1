/**
 * The files a write of the git store commits (docs/store.md, "Repository layout"): a manifest on the spec branch, a
 * session's status file on the status ref, each with what it parses to for the parse cache.
 */
import { CORE_SCHEMA, dump } from 'js-yaml';
import {
  renderManifest,
  sessionPath,
  type ParsedManifest,
  type ParseResult,
} from '../../../common/manifests.ts';
import type { SessionStatusRecord } from '../../../common/schema.ts';
import type { Session } from '../store.ts';
import type { FileWrite } from './branch.ts';

/** How the store writes and reads its own YAML: the core schema, no custom tags. */
export const YAML = { schema: CORE_SCHEMA };

/** The status file of a session on the status ref. */
export interface SessionStatusFile {
  uuid: string;
  status: SessionStatusRecord;
}

/** A spec file write, with what it parses to for the parse cache. */
export function manifestWrite(
  kind: ParsedManifest['kind'],
  path: string,
  name: string,
  spec: object,
): FileWrite {
  const parsed: ParseResult = { ok: true, manifest: { kind, name, spec } as ParsedManifest };
  return { path, text: renderManifest(kind, name, spec), parsed };
}

/** A session's status file write (metrics are observations, observations.ts, not status history). */
export function sessionStatusWrite(session: Session): FileWrite {
  const { metrics: _observed, ...status } = session.status;
  const file: SessionStatusFile = { uuid: session.spec.uuid, status };
  return { path: sessionPath(session.spec.router, session.spec.asn), text: dump(file, YAML), parsed: file };
}
