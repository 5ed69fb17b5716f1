/** The release version: the release bundle defines PEEROPS_BUILD_VERSION at build time (esbuild define). */
export const VERSION: string = process.env.PEEROPS_BUILD_VERSION ?? '0.1.0-dev';
