/**
 * The mesh step, first of a pass (docs/routing-policy.md, "Mesh between the network's routers"): the
 * controller's mesh answer (GET /agent/:router/mesh) and the loopbacks of the policy the pass holds
 * become the node's mesh key, its loopback link and one `wgm_*` tunnel per router, made through the
 * pass's WireGuard port; `wgm_*` links no router needs go. Its outcome names the tunnels the render
 * step runs Babel on and the links the pass wants up. When the controller does not answer, the mesh
 * stays as it is on the node: the last answer is used, or, after a restart, the `wgm_*` links found
 * (never an empty list that would take Babel off the running tunnels).
 */
import type { Logger } from 'pino';
import type { BirdConfigResponse, MeshResponse, MeshStatusBody } from '../../common/agent-api.ts';
import type { AgentConfig } from '../config.ts';
import { ensureMeshKey } from '../mesh/key.ts';
import { ensureLoopback } from '../mesh/loopback.ts';
import { MESH_INTERFACE_PREFIX, meshInterfaceSpecs } from '../mesh/spec.ts';
import { collectMeshStatus } from '../mesh/status.ts';
import type { WgInterfaceSpec, WireGuard } from '../wireguard/types.ts';

/** Where the mesh answer comes from: the controller's agent API (sync/client.ts). */
export interface MeshSource {
  mesh(): Promise<MeshResponse>;
}

export interface MeshOutcome {
  /** The tunnels Babel runs on: the main config's `babel` interfaces. */
  interfaces: readonly string[];
  /** The mesh tunnels the pass made to match their specs: a loss of one between passes needs a pass. */
  tunnels: readonly string[];
}

/** A router without a mesh (no node id, or no mesh source): Babel on the `wgm_*` pattern, no tunnel. */
export const NO_MESH: MeshOutcome = { interfaces: [], tunnels: [] };

export interface MeshStepDeps {
  config: AgentConfig;
  wireguard: WireGuard;
  source: MeshSource;
  log: Logger;
}

export class MeshStep {
  private readonly deps: MeshStepDeps;
  /** The controller's last answer: used while it does not answer, and the peers of the status report. */
  private last: MeshResponse | undefined;

  constructor(deps: MeshStepDeps) {
    this.deps = deps;
  }

  async run(policy: BirdConfigResponse): Promise<MeshOutcome> {
    const { config, source, log, wireguard } = this.deps;
    const nodeId = config.node.id;
    if (nodeId === undefined) return NO_MESH;
    let answer: MeshResponse;
    try {
      answer = await source.mesh();
      this.last = answer;
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'mesh: controller unreachable; keeping the mesh as it is');
      if (!this.last) {
        const found = [...(await wireguard.readAll([MESH_INTERFACE_PREFIX])).keys()];
        return { interfaces: found, tunnels: [] };
      }
      answer = this.last;
    }
    const key = await ensureMeshKey(config.tunnel.configDir);
    const loopback = await ensureLoopback(policy.loopback);
    if (loopback.changes.length)
      log.info({ link: loopback.link, changes: loopback.changes }, 'loopback changed');
    const specs = meshInterfaceSpecs(answer, {
      privateKeyPath: key.privateKeyPath,
      nodeId,
      loopback: policy.loopback,
      persistentKeepalive: config.tunnel.persistentKeepaliveInterval,
    });
    await this.tunnels(specs);
    const names = specs.map((s) => s.name);
    return { interfaces: names, tunnels: names };
  }

  /** Each mesh tunnel made to match its spec (a failed one leaves the others be); unlisted `wgm_*` links removed. */
  private async tunnels(specs: readonly WgInterfaceSpec[]): Promise<void> {
    const { wireguard, log } = this.deps;
    const links = await wireguard.readAll([MESH_INTERFACE_PREFIX]);
    const wanted = new Set(specs.map((s) => s.name));
    for (const name of links.keys())
      if (!wanted.has(name) && (await wireguard.remove(name)))
        log.info({ interface: name }, 'removed mesh tunnel no router needs');
    for (const spec of specs) {
      try {
        const { changes } = await wireguard.ensure(spec, links.get(spec.name) ?? null);
        if (changes.length) log.info({ interface: spec.name, changes }, 'mesh tunnel changed');
      } catch (err) {
        log.warn({ interface: spec.name, err: (err as Error).message }, 'mesh tunnel failed');
      }
    }
  }

  /** The status of every peer of the last answer (POST /agent/:router/mesh/status); undefined before one. */
  async status(): Promise<MeshStatusBody | undefined> {
    if (!this.last) return undefined;
    const links = await this.deps.wireguard.readAll([MESH_INTERFACE_PREFIX]);
    return collectMeshStatus(this.last, {
      pingTimeout: this.deps.config.metric.pingTimeout,
      readInterface: async (name) => links.get(name),
    });
  }
}
