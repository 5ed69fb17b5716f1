/**
 * The store's refusals the core's rules and the back ends both throw, each the catalogue's one wording
 * (common/messages.ts), named for the store's call sites: a module of their own, so that a back end
 * needs nothing of the core above it.
 */
import type { DomainError } from '../../../common/errors.ts';
import { fault, fieldError } from '../../../common/messages.ts';

export const routerNotFound = (name: string): DomainError => fault('router.notFound', { name });
export const sessionNotFound = (uuid: string): DomainError => fault('session.notFound', { uuid });
export const policyNotFound = (name: string): DomainError => fault('policy.notFound', { name });
export const routerExists = (name: string): DomainError => fault('router.exists', { name });

/** CONFLICT: a listen port another session on the router holds. */
export function portTaken(port: number, owner: string): DomainError {
  return fault('session.portTaken', { port, owner }, [
    fieldError('/listenPort', 'field.portUsed', { owner }),
  ]);
}
