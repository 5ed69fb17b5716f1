/**
 * The session manifests of an adoption plan, as a GitOps repository holds them (docs/gitops.md, "Adopted
 * sessions by pull request"): `sessions/<router>/as<asn>.yaml`, each with the `adopted` block the agent
 * takes the session over by. `by` and `at` are left out: the controller sets them from the merge.
 */
import { renderManifest, sessionPath } from '../../common/manifests.ts';
import { sessionName } from '../../common/naming.ts';
import type { PlannedSession } from './plan.ts';

export interface ManifestFile {
  /** The path inside the repository. */
  path: string;
  text: string;
}

export function sessionManifest(s: PlannedSession): ManifestFile {
  return {
    path: sessionPath(s.router, s.asn),
    text: renderManifest('PeeringSession', sessionName(s.asn, s.router), s),
  };
}
