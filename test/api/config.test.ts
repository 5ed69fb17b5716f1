import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../controller/config.ts';
import { redactUrl, redactUrls } from '../../common/redact.ts';

describe('controller configuration', () => {
  it('defaults: listen 127.0.0.1:8080 (loopback only), ./data, git store, 12 h tokens', () => {
    const config = loadConfig({}, {});
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(config.dataDir).toBe(resolve('data'));
    expect(config.store).toBe('git');
    expect(config.tokenTtlSeconds).toBe(12 * 3600);
    expect(config.agentAutoUpdate).toBe(true);
  });

  it('reads the token lifetime and refuses a bad one with the variable named', () => {
    expect(loadConfig({}, { PEEROPS_TOKEN_TTL: '3600' }).tokenTtlSeconds).toBe(3600);
    expect(() => loadConfig({}, { PEEROPS_TOKEN_TTL: '12h' })).toThrow(/PEEROPS_TOKEN_TTL/);
  });

  it("reads the portal sign-in's idle timeout (default 30 min) and refuses a bad one with the variable named", () => {
    expect(loadConfig({}, {}).portalIdleSeconds).toBe(1800);
    expect(loadConfig({}, { PEEROPS_PORTAL_IDLE_TIMEOUT: '900' }).portalIdleSeconds).toBe(900);
    for (const bad of ['30m', '59', '0'])
      expect(() => loadConfig({}, { PEEROPS_PORTAL_IDLE_TIMEOUT: bad })).toThrow(
        `PEEROPS_PORTAL_IDLE_TIMEOUT: '${bad}' is not a number of seconds from 60 to 31622400`,
      );
  });

  it('reads the log level (default info) and refuses an unknown one with the variable named', () => {
    expect(loadConfig({}, {}).logLevel).toBe('info');
    expect(loadConfig({}, { PEEROPS_LOG_LEVEL: 'DEBUG' }).logLevel).toBe('debug');
    expect(() => loadConfig({}, { PEEROPS_LOG_LEVEL: 'verbose' })).toThrow(
      /PEEROPS_LOG_LEVEL: 'verbose' is not one of fatal, error, warn, info, debug, trace, silent/,
    );
  });

  it('AGENT_AUTOUPDATE=false turns auto-update off fleet-wide', () => {
    expect(loadConfig({}, { AGENT_AUTOUPDATE: 'false' }).agentAutoUpdate).toBe(false);
    expect(loadConfig({}, { AGENT_AUTOUPDATE: 'TRUE' }).agentAutoUpdate).toBe(true);
    expect(loadConfig({}, {}).agentAutoUpdate).toBe(true);
    expect(() => loadConfig({}, { AGENT_AUTOUPDATE: 'maybe' })).toThrow(
      /AGENT_AUTOUPDATE: 'maybe' is not true or false/,
    );
  });

  it('flags win over the environment', () => {
    const config = loadConfig(
      { listen: '127.0.0.1:9000', data: '/srv/a' },
      { PEEROPS_LISTEN: ':7000', PEEROPS_DATA: '/srv/b' },
    );
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 9000 });
    expect(config.dataDir).toBe('/srv/a');
    expect(loadConfig({}, { PEEROPS_DATA: '/srv/b' }).dataDir).toBe('/srv/b');
  });

  it('an empty PEEROPS_DATA or PEEROPS_LISTEN means the default; an empty --data is refused', () => {
    const config = loadConfig({}, { PEEROPS_DATA: '', PEEROPS_LISTEN: '' });
    expect(config.dataDir).toBe(resolve('data'));
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(() => loadConfig({ data: '' }, {})).toThrow(/--data must name a directory/);
  });
});

describe('admission webhook configuration', () => {
  it('takes PEEROPS_WEBHOOK_LISTEN with PEEROPS_WEBHOOK_CERT_DIR on the Kubernetes store', () => {
    const env = { PEEROPS_STORE: 'kubernetes', PEEROPS_WEBHOOK_LISTEN: ':9443' };
    expect(loadConfig({}, {}).webhook).toBeUndefined();
    expect(loadConfig({}, { ...env, PEEROPS_WEBHOOK_CERT_DIR: '/etc/peerops/webhook' }).webhook).toEqual({
      listen: { host: '', port: 9443 },
      certDir: '/etc/peerops/webhook',
    });
  });

  it('refuses one without the other, and the git store, naming the variables', () => {
    expect(() => loadConfig({}, { PEEROPS_STORE: 'kubernetes', PEEROPS_WEBHOOK_LISTEN: ':9443' })).toThrow(
      /PEEROPS_WEBHOOK_LISTEN and PEEROPS_WEBHOOK_CERT_DIR go together/,
    );
    expect(() =>
      loadConfig({}, { PEEROPS_WEBHOOK_LISTEN: ':9443', PEEROPS_WEBHOOK_CERT_DIR: '/etc/peerops/webhook' }),
    ).toThrow(/the admission webhook is for PEEROPS_STORE=kubernetes/);
    expect(() =>
      loadConfig(
        {},
        { PEEROPS_STORE: 'kubernetes', PEEROPS_WEBHOOK_LISTEN: '9443', PEEROPS_WEBHOOK_CERT_DIR: '/x' },
      ),
    ).toThrow(/listen address '9443' is not HOST:PORT/);
  });
});

describe('trustProxy (docs/operator-guide.md, Behind a reverse proxy)', () => {
  it('is off by default; true, false, or a list of addresses, CIDRs and named ranges', () => {
    expect(loadConfig({}, {}).trustProxy).toBe(false);
    expect(loadConfig({}, { PEEROPS_TRUST_PROXY: '' }).trustProxy).toBe(false);
    expect(loadConfig({}, { PEEROPS_TRUST_PROXY: 'TRUE' }).trustProxy).toBe(true);
    expect(loadConfig({}, { PEEROPS_TRUST_PROXY: 'false' }).trustProxy).toBe(false);
    const list = '127.0.0.1, ::1,10.0.0.0/8,fd00::/8,loopback,uniquelocal,::ffff:192.0.2.1';
    expect(loadConfig({}, { PEEROPS_TRUST_PROXY: list }).trustProxy).toEqual([
      '127.0.0.1',
      '::1',
      '10.0.0.0/8',
      'fd00::/8',
      'loopback',
      'uniquelocal',
      '::ffff:192.0.2.1',
    ]);
    // the flag wins, as every flag does
    expect(loadConfig({ trustProxy: '192.0.2.1' }, { PEEROPS_TRUST_PROXY: 'true' }).trustProxy).toEqual([
      '192.0.2.1',
    ]);
  });

  it('every list it takes is one fastify takes', () => {
    const { trustProxy } = loadConfig(
      {},
      { PEEROPS_TRUST_PROXY: '127.0.0.1,fd00::/8,10.1.0.0/16,linklocal' },
    );
    expect(() => Fastify({ trustProxy })).not.toThrow();
  });

  it.each([
    ['1', /'1' is a hop count, which trusts no proxy/],
    ['proxy.example', /'proxy.example' is not an IP address, a CIDR/],
    ['10.0.0.0/33', /'10.0.0.0\/33' is not/],
    ['10.0.0.0/0', /'10.0.0.0\/0' is not/],
    ['fd00::/8/1', /'fd00::\/8\/1' is not/],
    ['10.0.0.1,', /'' is not/],
    ['010.0.0.1', /'010.0.0.1' is not/],
  ])('%s is refused, naming the setting', (value, reason) => {
    expect(() => loadConfig({}, { PEEROPS_TRUST_PROXY: value })).toThrow(
      /^--trust-proxy \(PEEROPS_TRUST_PROXY\): /,
    );
    expect(() => loadConfig({}, { PEEROPS_TRUST_PROXY: value })).toThrow(reason);
  });
});

describe('credentials in URLs are never shown', () => {
  it.each([
    ['https://user:s3cret@forge example/x.git', 'https://***@forge example/x.git'],
    ['https://x-access-token:s3cr/et@forge.example:99999/x.git', 'https://***@forge.example:99999/x.git'],
    ['//user:s3cret@forge.example/x.git', '***@forge.example/x.git'],
    ['https://forge.example/x y.git', 'https://forge.example/x y.git'],
  ])('an unparsable --git-remote %s is shown as %s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
    if (url.includes('s3cr'))
      expect(() => loadConfig({ gitRemote: url }, {})).toThrow(`--git-remote: '${shown}' is not a URL`);
  });

  it('in any message: every URL with a user part', () => {
    expect(
      redactUrls(
        "fetch https://u:tok@a.example/r.git failed; then git+ssh://git:pw@b.example:22/r, 'redis://:pw@c:6379'",
      ),
    ).toBe(
      "fetch https://***@a.example/r.git failed; then git+ssh://***@b.example:22/r, 'redis://***@c:6379'",
    );
    expect(redactUrls('no URL here, user@example.net')).toBe('no URL here, user@example.net');
  });

  it('`peerops serve` says so and exits 2, without the token', async () => {
    const run = promisify(execFile);
    const failed = await run(
      process.execPath,
      ['bin/peerops.ts', 'serve', '--git-remote', 'https://user:s3cr3t-t0ken@forge example/x.git'],
      { env: { ...process.env, PEEROPS_STORE: 'git' } },
    ).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr).toContain("--git-remote: 'https://***@forge example/x.git' is not a URL");
    expect(failed?.stderr).not.toContain('s3cr3t');
  });
});

describe('the push mode of a forge', () => {
  const remote = 'https://forge.example/net/peering.git';

  it('defaults to sync with a 5 s wait; flags win over the environment', () => {
    expect(loadConfig({ gitRemote: remote }, {}).git.remote).toMatchObject({
      pushMode: 'sync',
      pushTimeoutMs: 5000,
    });
    const env = { PEEROPS_GIT_PUSH_MODE: 'sync', PEEROPS_GIT_PUSH_TIMEOUT: '3' };
    expect(loadConfig({ gitRemote: remote }, env).git.remote).toMatchObject({ pushTimeoutMs: 3000 });
    expect(
      loadConfig({ gitRemote: remote, gitPushMode: 'async', gitPushTimeout: '1.5' }, env).git.remote,
    ).toMatchObject({ pushMode: 'async', pushTimeoutMs: 1500 });
  });

  it.each([
    [{ gitPushMode: 'later' }, {}, "--git-push-mode (PEEROPS_GIT_PUSH_MODE): 'later' is not sync or async"],
    [{}, { PEEROPS_GIT_PUSH_MODE: 'SYNC' }, "--git-push-mode (PEEROPS_GIT_PUSH_MODE): 'SYNC' is not"],
    [{ gitPushTimeout: '0' }, {}, "--git-push-timeout (PEEROPS_GIT_PUSH_TIMEOUT): '0' is not a number"],
    [{}, { PEEROPS_GIT_PUSH_TIMEOUT: '5s' }, "--git-push-timeout (PEEROPS_GIT_PUSH_TIMEOUT): '5s' is not"],
    [{ gitPushTimeout: '61' }, {}, 'seconds from 1 to 60'],
  ])('refuses %o %o with the setting named', (flags, env, reason) => {
    expect(() => loadConfig({ gitRemote: remote, ...flags }, env)).toThrow(reason);
  });
});
