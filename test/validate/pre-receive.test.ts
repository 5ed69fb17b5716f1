/**
 * Checked pushes (docs/gitops.md): the store's bare repository with the pre-receive hook refuses a push
 * the store would skip, with the file and reason on the pusher's stderr, and any push to the status ref.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installPreReceiveHook, preReceiveScript } from '../../controller/store/git/pre-receive.ts';

const exec = promisify(execFile);
const good = resolve(import.meta.dirname, '../fixtures/validate/good');
const entry = resolve(import.meta.dirname, '../../bin/peerops.ts');

let dir: string;
let bare: string;
let work: string;

async function git(cwd: string, ...args: string[]): Promise<string> {
  return (await exec('git', args, { cwd })).stdout.trim();
}

/** `git push`, resolved with its stderr whether git took the push or not. */
async function push(...refspec: string[]): Promise<{ ok: boolean; stderr: string }> {
  try {
    const { stderr } = await exec('git', ['push', bare, ...refspec], { cwd: work });
    return { ok: true, stderr };
  } catch (err) {
    return { ok: false, stderr: (err as { stderr: string }).stderr };
  }
}

async function commit(message: string): Promise<void> {
  await git(work, 'add', '-A');
  await git(work, '-c', 'user.name=Test', '-c', 'user.email=test@example.net', 'commit', '-q', '-m', message);
}

describe('pre-receive hook', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-hook-'));
    bare = join(dir, 'store.git');
    work = join(dir, 'work');
    await exec('git', ['init', '-q', '--bare', '-b', 'main', bare]);
    await installPreReceiveHook(bare, { entry });
    await exec('git', ['init', '-q', '-b', 'main', work]);
    await cp(good, work, { recursive: true });
    await commit('a network');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is written once, mode 0755, running this Node on the given entry point', async () => {
    const path = join(bare, 'hooks/pre-receive');
    const text = await readFile(path, 'utf8');
    expect(text).toBe(preReceiveScript(process.execPath, entry));
    expect(text).toContain(`exec '${process.execPath}' '${entry}' hook pre-receive`);
    expect((await stat(path)).mode & 0o777).toBe(0o755);
    // unchanged content: not rewritten; changed content: replaced
    const { mtimeMs } = await stat(path);
    await installPreReceiveHook(bare, { entry });
    expect((await stat(path)).mtimeMs).toBe(mtimeMs);
    await writeFile(path, '#!/bin/sh\nexit 0\n');
    await installPreReceiveHook(bare, { entry });
    expect(await readFile(path, 'utf8')).toBe(text);
    expect(preReceiveScript('/n', "/it's", 'spec')).toContain(
      `PEEROPS_GIT_BRANCH='spec' exec '/n' '/it'\\''s' hook pre-receive`,
    );
  });

  it('accepts a push of a good manifest set', async () => {
    const result = await push('HEAD:refs/heads/main');
    expect(result).toMatchObject({ ok: true });
    expect(await git(bare, 'rev-parse', 'main')).toBe(await git(work, 'rev-parse', 'HEAD'));
  });

  it('refuses a broken manifest with the file and reason on stderr, and leaves the ref alone', async () => {
    const before = await git(bare, 'rev-parse', 'main');
    const file = join(work, 'sessions/ams1/as64512.yaml');
    const text = await readFile(file, 'utf8');
    await writeFile(file, text.replace('mtu: 1420', 'mtu: 99999'));
    // a session of ams1 under fra1's directory
    await writeFile(join(work, 'sessions/fra1/as64513.yaml'), text.replaceAll('64512', '64513'));
    await commit('broken');
    const result = await push('HEAD:refs/heads/main');
    expect(result.ok).toBe(false);
    expect(result.stderr).toContain('remote: sessions/ams1/as64512.yaml: /spec/mtu: must be 9000 or less');
    expect(result.stderr).toContain(
      'remote: sessions/fra1/as64513.yaml: /spec/router: must be fra1 for a file at sessions/fra1/as64513.yaml',
    );
    expect(result.stderr).toContain('remote: peerops: refs/heads/main refused: 3 problem(s)');
    expect(result.stderr).toMatch(/pre-receive hook declined/);
    expect(await git(bare, 'rev-parse', 'main')).toBe(before);
  });

  it('refuses a change that breaks an unchanged file, judged against the pushed base', async () => {
    await git(work, 'reset', '-q', '--hard', 'HEAD~1');
    await rm(join(work, 'routers/ams1.yaml'));
    await commit('remove ams1 under its sessions');
    const result = await push('HEAD:refs/heads/main');
    expect(result.ok).toBe(false);
    expect(result.stderr).toContain(
      "remote: sessions/ams1/as64512.yaml: /spec/router: names an unknown router 'ams1' (the file is unchanged: this change breaks it)",
    );
    await git(work, 'reset', '-q', '--hard', 'HEAD~1');
  });

  it('refuses any push to peerops-status, and deleting the spec branch; other branches are not checked', async () => {
    const status = await push('HEAD:refs/heads/peerops-status');
    expect(status.ok).toBe(false);
    expect(status.stderr).toContain(
      'remote: peerops: refs/heads/peerops-status is written by the controller only',
    );
    await expect(
      git(bare, 'rev-parse', '--verify', '--quiet', 'refs/heads/peerops-status'),
    ).rejects.toThrow();
    const deletion = await push(':refs/heads/main');
    expect(deletion.ok).toBe(false);
    expect(deletion.stderr).toContain('cannot be deleted');
    await writeFile(join(work, 'routers/ams1.yaml'), 'not: a router\n');
    await commit('work in progress');
    expect((await push('HEAD:refs/heads/draft')).ok).toBe(true);
  });
});
