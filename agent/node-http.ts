/**
 * node:http for the agent, loaded with require instead of an ESM import. Node 24 builds the namespace of
 * an imported built-in by reading each of its exports, and node:http's WebSocket, CloseEvent and
 * MessageEvent are getters that load undici (with node:http2): about 13 MiB of RSS for code the agent
 * never runs (docs/benchmarks.md, The agent). require reads none of them.
 */
import { createRequire } from 'node:module';
import type * as Http from 'node:http';

export const { createServer, request } = createRequire(import.meta.url)('node:http') as typeof Http;
