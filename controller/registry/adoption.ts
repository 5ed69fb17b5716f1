/**
 * Why an adopted session is DISABLED rather than awaiting review: the DN42 registry gives its peer
 * addresses to another network (docs/decisions.md, "Adopted sessions arrive awaiting review; one the
 * registry refuses arrives DISABLED"). One rule for both ways an adoption arrives: `POST
 * /admin/adoptions` (controller/api/adoptions.ts) and a merge into the GitOps repository, which the
 * reconciler judges (controller/reconcile/session-reconciler.ts).
 */
import { englishText, fieldAtFault } from '../../common/messages.ts';
import { peerAddressRangeErrors } from '../../common/rules/index.ts';
import type { PolicySpec, SessionSpec, SessionStatusRecord } from '../../common/schema.ts';
import { routeObjectErrors, type RouteSource } from './routes.ts';

/**
 * The lastError an adopted session is DISABLED with, or undefined when the registry does not refuse it
 * (or holds no route objects). Addresses outside the policy's peer ranges are the store's to refuse, not
 * the registry's: they are not looked up.
 */
export async function adoptionRefusal(
  registry: RouteSource | undefined,
  spec: Pick<SessionSpec, 'asn' | 'ipv6' | 'ipv4'>,
  policy: PolicySpec,
): Promise<NonNullable<SessionStatusRecord['lastError']> | undefined> {
  if (!registry?.files || peerAddressRangeErrors(spec, policy).length > 0) return undefined;
  const errors = await routeObjectErrors(registry, spec.asn, spec);
  if (errors.length === 0) return undefined;
  // a stored lastError's parameters are text of at most 256 characters (common/schema.ts, LastError)
  const why = Object.fromEntries(
    Object.entries(fieldAtFault(errors)).map(([k, v]) => [k, String(v).slice(0, 256)]),
  );
  return {
    code: 'INVALID_REQUEST',
    message: englishText('lastError.registryRefused', why),
    key: 'lastError.registryRefused',
    params: why,
  };
}
