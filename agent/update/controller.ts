/**
 * The controller's word on auto-update: `autoUpdate` of GET /agent/:router/config (DESIGN.md section 5).
 * It is asked afresh before every check, so `AGENT_AUTOUPDATE=false` on the controller stops the fleet
 * at its next check without touching any router's file.
 */
import { BootstrapConfigResponse } from '../../common/agent-api.ts';
import { validate } from '../../common/validate.ts';
import { UpdateError, type UpdateChannel } from './releases.ts';

export interface ControllerAutoUpdate {
  enabled: boolean;
  channel: UpdateChannel;
}

export async function fetchControllerAutoUpdate(
  controlPlaneUrl: string,
  router: string,
  token: string,
  timeoutMs: number,
): Promise<ControllerAutoUpdate> {
  const url = `${controlPlaneUrl.replace(/\/+$/, '')}/agent/${encodeURIComponent(router)}/config`;
  const res = await fetch(url, {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!res.ok) throw new UpdateError(`GET /agent/${router}/config answered HTTP ${res.status}`);
  const checked = validate<BootstrapConfigResponse>(BootstrapConfigResponse, await res.json());
  if (!checked.ok) {
    const e = checked.errors[0];
    throw new UpdateError(`GET /agent/${router}/config: ${e ? `${e.pointer} ${e.message}` : 'invalid body'}`);
  }
  return checked.value.autoUpdate as ControllerAutoUpdate;
}
