/**
 * The mesh inside the agent's loop. As the reconcile hooks (reconcile/node-reconciler.ts) it fetches
 * GET /agent/:router/mesh and the policy's loopbacks on every pass, puts the loopbacks on their link,
 * applies the mesh tunnels (apply.ts) and hands their specs and names to the pass, whose main config
 * then runs Babel on exactly those interfaces. Its own timer posts POST /agent/:router/mesh/status.
 * When the controller cannot be reached the mesh stays as it is on the node: the last answer is used,
 * or, after a restart, the `wgm_*` links found on the system (never an empty list that would take Babel
 * off the running tunnels).
 */
import type { Logger } from 'pino';
import type { BirdConfigResponse, MeshResponse, MeshStatusBody } from '../../common/agent-api.ts';
import type { AgentConfig } from '../config.ts';
import type { ReconcileHooks } from '../reconcile/node-reconciler.ts';
import { listInterfaces } from '../wireguard/interface.ts';
import type { WgInterfaceSpec } from '../wireguard/types.ts';
import { applyMesh } from './apply.ts';
import { ensureMeshKey } from './key.ts';
import { ensureLoopback } from './loopback.ts';
import { MESH_INTERFACE_PREFIX, meshInterfaceSpecs } from './spec.ts';
import { collectMeshStatus } from './status.ts';

export interface MeshClient {
  mesh(): Promise<MeshResponse>;
  birdConfig(): Promise<BirdConfigResponse>;
  meshStatus(body: MeshStatusBody): Promise<void>;
}

export class MeshManager {
  private readonly config: AgentConfig;
  private readonly client: MeshClient;
  private readonly log: Logger;
  private last: { mesh: MeshResponse; specs: WgInterfaceSpec[] } | undefined;
  private names: string[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(config: AgentConfig, client: MeshClient, log: Logger) {
    this.config = config;
    this.client = client;
    this.log = log;
  }

  hooks(): ReconcileHooks {
    return {
      extraInterfaces: () => this.desiredInterfaces(),
      meshInterfaces: () => this.names,
    };
  }

  /** One mesh pass: the desired tunnels applied; resolves with their specs for the reconcile pass. */
  async desiredInterfaces(): Promise<WgInterfaceSpec[]> {
    const nodeId = this.config.node.id;
    if (nodeId === undefined) return [];
    let mesh: MeshResponse;
    let policy: BirdConfigResponse;
    try {
      [mesh, policy] = await Promise.all([this.client.mesh(), this.client.birdConfig()]);
    } catch (err) {
      this.log.warn(
        { err: (err as Error).message },
        'mesh: controller unreachable; keeping the mesh as it is',
      );
      if (this.last) return this.last.specs;
      this.names = await listInterfaces(MESH_INTERFACE_PREFIX);
      return [];
    }
    const key = await ensureMeshKey(this.config.tunnel.configDir);
    const loopback = await ensureLoopback(policy.loopback);
    if (loopback.changes.length)
      this.log.info({ link: loopback.link, changes: loopback.changes }, 'loopback changed');
    const specs = meshInterfaceSpecs(mesh, {
      privateKeyPath: key.privateKeyPath,
      nodeId,
      loopback: policy.loopback,
      persistentKeepalive: this.config.tunnel.persistentKeepaliveInterval,
    });
    const applied = await applyMesh(specs);
    for (const [name, changes] of Object.entries(applied.changed))
      this.log.info({ interface: name, changes }, 'mesh tunnel changed');
    for (const name of applied.removed)
      this.log.info({ interface: name }, 'removed mesh tunnel no router needs');
    for (const [name, err] of Object.entries(applied.failed))
      this.log.warn({ interface: name, err }, 'mesh tunnel failed');
    this.last = { mesh, specs };
    this.names = specs.map((s) => s.name);
    return specs;
  }

  /** Posts the status of every mesh peer of the last answer. */
  async reportStatus(): Promise<MeshStatusBody | undefined> {
    if (!this.last) return undefined;
    const body = await collectMeshStatus(this.last.mesh, { pingTimeout: this.config.metric.pingTimeout });
    await this.client.meshStatus(body);
    return body;
  }

  /** Reports every metricInterval seconds until stop(). */
  start(): void {
    this.timer = setInterval(() => {
      this.reportStatus().catch((err: Error) =>
        this.log.warn({ err: err.message }, 'mesh status report failed'),
      );
    }, this.config.controlPlane.metricInterval * 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
