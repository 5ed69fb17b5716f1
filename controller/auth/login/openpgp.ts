/**
 * openpgp.js, loaded at the first login check that needs it, not at start: a controller without a
 * registry (login off) never does, and it is about a third of the code a start would compile
 * (docs/benchmarks.md, "Start to ready").
 */
export const loadOpenpgp = () => import('openpgp');
