/**
 * One pool of connections to the API server per KubeConfig. @kubernetes/client-node 2.0 builds a new
 * undici Agent in KubeConfig.applySecurityAuthentication, which runs before every API call: each call
 * opened its own TCP and TLS connection and never used it again (3 ms of controller CPU per call
 * measured, most of it the TLS handshake; 10,000 session status patches took 80 s). There is no option
 * for it, so this wraps that method on the instance: the KubeConfig still does all of its work (headers,
 * tokens, TLS options), then the request gets the Agent kept for the TLS material in force. When that
 * material changes (a rotated CA or client certificate, re-read from its file as the library does), the
 * new Agent is kept and the old one closed once its requests are done.
 */
import { createHash } from 'node:crypto';
import { bufferFromFileOrString, type KubeConfig, type RequestContext } from '@kubernetes/client-node';

type Agent = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

const pooled = new WeakSet<KubeConfig>();

/** What the library builds an Agent from: the cluster's address, CA and TLS flags, the user's certificate. */
function tlsMaterial(kubeConfig: KubeConfig): string {
  const cluster = kubeConfig.getCurrentCluster();
  const user = kubeConfig.getCurrentUser();
  const hash = createHash('sha256').update(
    JSON.stringify([cluster?.server, cluster?.skipTLSVerify, cluster?.tlsServerName]),
  );
  for (const part of [
    bufferFromFileOrString(cluster?.caFile, cluster?.caData),
    bufferFromFileOrString(user?.certFile, user?.certData),
    bufferFromFileOrString(user?.keyFile, user?.keyData),
  ])
    hash.update(part ? `${part.length}:` : '-:').update(part ?? '');
  return hash.digest('hex');
}

/** Makes every API client of `kubeConfig` share one connection pool (idempotent). */
export function pooledConnections(kubeConfig: KubeConfig): KubeConfig {
  if (pooled.has(kubeConfig)) return kubeConfig;
  pooled.add(kubeConfig);
  const authenticate = kubeConfig.applySecurityAuthentication.bind(kubeConfig);
  let kept: { material: string; agent: Agent } | undefined;
  kubeConfig.applySecurityAuthentication = async (context) => {
    await authenticate(context);
    const fresh = context.getDispatcher();
    // none: plain HTTP without TLS options, where fetch's own pooled global dispatcher serves
    if (!fresh) return;
    const material = tlsMaterial(kubeConfig);
    if (kept?.material === material) return context.setDispatcher(kept.agent);
    void kept?.agent.close();
    kept = { material, agent: fresh };
  };
  return kubeConfig;
}
