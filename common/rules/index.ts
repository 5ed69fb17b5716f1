/**
 * Every rule on routers, sessions and policies, defined once, outside the controller: both store back ends
 * (through controller/store/core), the API, `peerops validate` and the admission webhook import them from
 * here. Refusals are DomainErrors (no HTTP); the API maps them to problem details (controller/api/problem.ts).
 */
export * from './addressing.ts';
export * from './policy.ts';
export * from './routers.ts';
export * from './sessions.ts';
