/**
 * Where the portal's files come from. A release bundle (scripts/build-release.ts) has them baked in as
 * `__PEEROPS_PORTAL_FILES__`, their JSON text: a string esbuild puts only where it is used, where an
 * array would be a module every chunk runs, the agent's too (about 1 MiB of its RSS; docs/benchmarks.md,
 * The agent). From the source tree (`npm start`, the tests) they are built in memory from
 * web/ with esbuild, a development dependency, on the first request that needs them.
 */
import type * as BuildModule from './build.ts';

export interface PortalFile {
  /** Path under `/`, no leading slash: `index.html`, `assets/app-<hash>.js`. */
  path: string;
  contentType: string;
  body: string;
}

declare const __PEEROPS_PORTAL_FILES__: string | undefined;

export async function loadPortalFiles(): Promise<PortalFile[]> {
  if (typeof __PEEROPS_PORTAL_FILES__ === 'string')
    return JSON.parse(__PEEROPS_PORTAL_FILES__) as PortalFile[];
  // A specifier the bundler does not follow: a release carries the built files, never esbuild.
  const builder = './build.ts';
  const { buildPortal } = (await import(builder)) as typeof BuildModule;
  return buildPortal();
}
