/**
 * A git smart-HTTP server for tests: `git http-backend` as a CGI behind a node http server on 127.0.0.1.
 * `failing = true` makes it answer 500 to everything (a host that is down); `hanging = true` makes it
 * accept requests and never answer; `auth` asks for Basic credentials; `before` runs before a request.
 */
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GitHttpServer {
  url: string;
  failing: boolean;
  hanging: boolean;
  /** Runs before each request is served (a test's way to land a push between a fetch and a push). */
  before: ((req: IncomingMessage) => Promise<void>) | undefined;
  /** Basic credentials every request must carry (401 otherwise), when set. */
  auth: { username: string; password: string } | undefined;
  /** Requests received so far. */
  requests: number;
  /** `git http-backend` processes still running (a push whose client died may still be landing). */
  running: number;
  close(): Promise<void>;
}

function cgi(root: string, req: IncomingMessage, res: ServerResponse, state: { running: number }): void {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    REQUEST_METHOD: req.method,
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.slice(1),
    CONTENT_TYPE: req.headers['content-type'] ?? '',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
    ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
    ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
  };
  const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'ignore'] });
  state.running++;
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headerDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headerDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headerDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString().split('\r\n')) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else res.setHeader(name, value);
    }
    res.statusCode = status;
    res.write(head.subarray(end + 4));
  });
  child.on('close', () => {
    state.running--;
    if (!headerDone) res.statusCode = 500;
    res.end();
  });
}

/** Serve every repository under root at http://127.0.0.1:<port>/<name>. */
export async function serveGit(root: string): Promise<GitHttpServer> {
  const state: Pick<GitHttpServer, 'failing' | 'hanging' | 'before' | 'auth' | 'requests' | 'running'> = {
    failing: false,
    hanging: false,
    before: undefined,
    auth: undefined,
    requests: 0,
    running: 0,
  };
  const server: Server = createServer((req, res) => {
    state.requests++;
    if (state.hanging) return;
    if (state.failing) {
      res.statusCode = 500;
      res.end('registry host is down');
      return;
    }
    if (state.auth) {
      const expected = `Basic ${Buffer.from(`${state.auth.username}:${state.auth.password}`).toString('base64')}`;
      if (req.headers.authorization !== expected) {
        res.statusCode = 401;
        res.setHeader('www-authenticate', 'Basic realm="git"');
        res.end('authentication required');
        return;
      }
    }
    const before = state.before;
    if (before) void before(req).then(() => cgi(root, req, res, state));
    else cgi(root, req, res, state);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
