/**
 * Webhook definitions of the Kubernetes store (webhooks.ts says why beside the store): the Secret
 * `peerops-webhooks` in the store's namespace, read fresh each time (replicas write it too) and written
 * with its resourceVersion, so two replicas' writes never overwrite each other. Loaded only with that store.
 */
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { defaultKubeConfig, defaultNamespace } from '../store/kubernetes/index.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../store/kubernetes/api.ts';
import { EditedWebhooks, parseWebhooks, serialise, type Edit, type Webhook } from './webhooks.ts';

export const WEBHOOK_SECRET_NAME = 'peerops-webhooks';
const KEY = 'webhooks.json';

export class KubernetesWebhooks extends EditedWebhooks {
  private readonly api: CoreV1Api;
  private readonly namespace: string;

  constructor(kubeConfig: KubeConfig, namespace: string) {
    super();
    this.api = kubeConfig.makeApiClient(CoreV1Api);
    this.namespace = namespace;
  }

  private async read(): Promise<V1Secret | undefined> {
    try {
      return await this.api.readNamespacedSecret({ name: WEBHOOK_SECRET_NAME, namespace: this.namespace });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  private static webhooksOf(secret: V1Secret | undefined): Webhook[] {
    const data = secret?.data?.[KEY];
    return parseWebhooks(data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8'));
  }

  async list(): Promise<Webhook[]> {
    return KubernetesWebhooks.webhooksOf(await this.read());
  }

  /** Read, edit, write with the read's resourceVersion; again on a conflict (another replica wrote). */
  protected async change<T>(edit: Edit<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const current = await this.read();
      const { webhooks, result } = edit(KubernetesWebhooks.webhooksOf(current));
      const data = { [KEY]: Buffer.from(serialise(webhooks)).toString('base64') };
      try {
        if (current)
          await this.api.replaceNamespacedSecret({
            name: WEBHOOK_SECRET_NAME,
            namespace: this.namespace,
            body: { ...current, data },
          });
        else
          await this.api.createNamespacedSecret({
            namespace: this.namespace,
            body: {
              metadata: { name: WEBHOOK_SECRET_NAME, labels: { 'app.kubernetes.io/managed-by': 'peerops' } },
              type: 'Opaque',
              data,
            },
          });
        return result;
      } catch (err) {
        // another replica wrote (or created the Secret) since the read: read again
        if (!(isConflict(err) || isAlreadyExists(err)) || attempt >= 10) throw err;
      }
    }
  }
}

/** The repository of `peerops serve` on the Kubernetes store: the store's own cluster and namespace. */
export function kubernetesWebhooks(): KubernetesWebhooks {
  return new KubernetesWebhooks(defaultKubeConfig(), defaultNamespace());
}
