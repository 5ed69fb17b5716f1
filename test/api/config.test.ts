import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../controller/config.ts';

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
