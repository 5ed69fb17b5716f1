/**
 * Makes the node's mesh tunnels match the desired specs: ensures each through the wireguard module,
 * turns multicast on (Babel speaks to ff02::1:6; kernel WireGuard links come without the flag) and
 * removes `wgm_*` links no longer listed. Level-triggered: every pass reads the system afresh.
 */
import { runOk, run } from '../system/exec.ts';
import { ensureInterface, listInterfaces, removeInterface } from '../wireguard/interface.ts';
import type { WgInterfaceSpec } from '../wireguard/types.ts';
import { MESH_INTERFACE_PREFIX } from './spec.ts';

export interface MeshApplyResult {
  /** Interface name → what was changed (only interfaces that changed). */
  changed: Record<string, string[]>;
  removed: string[];
  /** Interface name → error message, for tunnels that could not be set up (the others still are). */
  failed: Record<string, string>;
}

export async function applyMesh(specs: readonly WgInterfaceSpec[]): Promise<MeshApplyResult> {
  const result: MeshApplyResult = { changed: {}, removed: [], failed: {} };
  const wanted = new Set(specs.map((s) => s.name));
  for (const name of await listInterfaces(MESH_INTERFACE_PREFIX)) {
    if (!wanted.has(name) && (await removeInterface(name))) result.removed.push(name);
  }
  for (const spec of specs) {
    try {
      const { changes } = await ensureInterface(spec);
      if (await ensureMulticast(spec.name)) changes.push('multicast on');
      if (changes.length > 0) result.changed[spec.name] = changes;
    } catch (err) {
      result.failed[spec.name] = (err as Error).message;
    }
  }
  return result;
}

async function ensureMulticast(name: string): Promise<boolean> {
  const r = await run('ip', ['-j', 'link', 'show', 'dev', name]);
  const flags = r.code === 0 ? ((JSON.parse(r.stdout) as { flags?: string[] }[])[0]?.flags ?? []) : [];
  if (flags.includes('MULTICAST')) return false;
  await runOk('ip', ['link', 'set', 'dev', name, 'multicast', 'on']);
  return true;
}
