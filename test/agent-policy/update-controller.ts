/** How the self-update tests ask the controller whether to update: the agent's own client, as in agent/main.ts. */
import { ControlPlaneClient } from '../../agent/sync/client.ts';

export function autoUpdateFrom(url: string, token: string) {
  const client = new ControlPlaneClient({
    url,
    token,
    router: 'r1',
    requestTimeout: 5,
    maxRetries: 0,
    retryInitialDelay: 100,
    retryMaxDelay: 2000,
  });
  return client.bootstrap().then((b) => b.autoUpdate);
}
