/**
 * Containers of the built images under runc, for the image tests: an image unpacked once into a root file
 * system (umoci unpack), then any number of containers on it, each with its own bundle (config.json) that
 * says what the Kubernetes objects of the chart say: user, capabilities, read-only root, mounts, and the
 * network namespace (a lab namespace standing for the node, or the host's loopback).
 *
 *   const image = await unpackImage('dist/peerops-agent-0.1.0.oci.tar', '0.1.0', dir);
 *   const c = await RuncContainer.start({ id, image, dir, args, user: { uid: 10001, gid: 10001 }, ... });
 *   await c.exec(['sh', '-c', 'touch /x']);   c.logs();   await c.stop();
 *
 * runc keeps its state under its own --root, so the containers of a test run never meet anyone else's.
 */
import { spawn } from 'node:child_process';
import { openSync, closeSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { exec, type RunResult } from '../support/netns.ts';

const RUNC_ROOT = '/run/peerops-test-runc';
/** The images' entrypoint: node and the bundle (scripts/build-image.ts). */
const ENTRYPOINT_LENGTH = 2;

/** The OCI runtime spec fields this helper sets (runtime-spec config.json). */
interface RuntimeSpec {
  process: {
    terminal: boolean;
    user: { uid: number; gid: number; additionalGids?: number[] };
    args: string[];
    env: string[];
    cwd: string;
    capabilities: Record<'bounding' | 'effective' | 'permitted' | 'inheritable' | 'ambient', string[]>;
    noNewPrivileges: boolean;
  };
  root: { path: string; readonly: boolean };
  mounts: { destination: string; type: string; source: string; options: string[] }[];
  linux: {
    namespaces: { type: string; path?: string }[];
    devices?: {
      path: string;
      type: string;
      major: number;
      minor: number;
      fileMode: number;
      uid: number;
      gid: number;
    }[];
    resources?: {
      devices?: { allow: boolean; type?: string; major?: number; minor?: number; access?: string }[];
    };
    cgroupsPath?: string;
  };
}

/**
 * Unpacks the image of an OCI archive (`peerops-<name>-<version>.oci.tar`, tagged `tag`) into
 * `<dir>/rootfs` and returns the image's own runtime config with it.
 */
export async function unpackImage(
  archive: string,
  tag: string,
  dir: string,
): Promise<{ rootfs: string; spec: RuntimeSpec }> {
  await rm(dir, { recursive: true, force: true });
  const layout = `${dir}.oci`;
  await rm(layout, { recursive: true, force: true });
  await mkdir(layout, { recursive: true });
  const untar = await exec('tar', ['-xf', archive, '-C', layout], { timeoutMs: 120_000 });
  if (untar.code !== 0) throw new Error(`tar -xf ${archive}: ${untar.stderr}`);
  const r = await exec('umoci', ['unpack', '--image', `${layout}:${tag}`, dir], { timeoutMs: 300_000 });
  if (r.code !== 0) throw new Error(`umoci unpack ${layout}:${tag}: ${r.stderr}`);
  await rm(layout, { recursive: true, force: true });
  const spec = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as RuntimeSpec;
  return { rootfs: join(dir, 'rootfs'), spec };
}

export interface ContainerOptions {
  id: string;
  /** From unpackImage: the root file system and the image's runtime config (args, env, cwd). */
  image: { rootfs: string; spec: RuntimeSpec };
  /** Where this container's bundle (config.json) and log go. */
  dir: string;
  /** Arguments after the image's entrypoint (the Kubernetes `args`); default: the image's. */
  args?: string[];
  /** The whole command instead of the image's entrypoint and arguments (the Kubernetes `command`). */
  command?: string[];
  env?: Record<string, string>;
  user?: { uid: number; gid: number };
  capabilities?: string[];
  readOnlyRoot?: boolean;
  /** Bind mounts: host path → container path. */
  binds?: { source: string; destination: string; readOnly?: boolean }[];
  /** A network namespace of /var/run/netns; none: the host's (the tests use its loopback only). */
  netns?: string;
  /** /dev/net/tun in the container (the chart mounts the node's). */
  tun?: boolean;
}

export class RuncContainer {
  readonly id: string;
  private readonly logFile: string;

  private constructor(id: string, logFile: string) {
    this.id = id;
    this.logFile = logFile;
  }

  static async start(o: ContainerOptions): Promise<RuncContainer> {
    const base = o.image.spec;
    const caps = (o.capabilities ?? []).map((c) => `CAP_${c}`);
    const spec: RuntimeSpec = {
      ...base,
      process: {
        ...base.process,
        terminal: false,
        user: o.user ?? base.process.user,
        args:
          o.command ??
          (o.args ? [...base.process.args.slice(0, ENTRYPOINT_LENGTH), ...o.args] : base.process.args),
        env: [...base.process.env, ...Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${v}`)],
        capabilities: { bounding: caps, effective: caps, permitted: caps, inheritable: [], ambient: [] },
        // allowPrivilegeEscalation: false
        noNewPrivileges: true,
      },
      root: { path: o.image.rootfs, readonly: o.readOnlyRoot ?? false },
      mounts: [
        ...base.mounts,
        ...(o.binds ?? []).map((b) => ({
          destination: b.destination,
          type: 'bind',
          source: b.source,
          options: ['rbind', b.readOnly ? 'ro' : 'rw'],
        })),
      ],
      linux: {
        ...base.linux,
        cgroupsPath: `/peerops-test/${o.id}`,
        namespaces: [
          ...base.linux.namespaces.filter((n) => n.type !== 'network'),
          ...(o.netns ? [{ type: 'network', path: `/var/run/netns/${o.netns}` }] : []),
        ],
        ...(o.tun
          ? {
              devices: [
                ...(base.linux.devices ?? []),
                { path: '/dev/net/tun', type: 'c', major: 10, minor: 200, fileMode: 0o666, uid: 0, gid: 0 },
              ],
              resources: {
                ...base.linux.resources,
                devices: [
                  ...(base.linux.resources?.devices ?? []),
                  { allow: true, type: 'c', major: 10, minor: 200, access: 'rwm' },
                ],
              },
            }
          : {}),
      },
    };
    await mkdir(o.dir, { recursive: true });
    await writeFile(join(o.dir, 'config.json'), JSON.stringify(spec, null, 2));
    const logFile = join(o.dir, 'output.log');
    // runc -d hands these descriptors to the container's process: its output lands in the file
    const fd = openSync(logFile, 'a');
    try {
      const r = await new Promise<RunResult>((resolve, reject) => {
        const child = spawn('runc', ['--root', RUNC_ROOT, 'run', '-d', '--bundle', o.dir, o.id], {
          stdio: ['ignore', fd, fd],
        });
        child.on('error', reject);
        child.on('close', (code) => resolve({ code: code ?? -1, stdout: '', stderr: '' }));
      });
      if (r.code !== 0)
        throw new Error(`runc run ${o.id} failed (${r.code}):\n${readFileSync(logFile, 'utf8')}`);
    } finally {
      closeSync(fd);
    }
    return new RuncContainer(o.id, logFile);
  }

  /** What the container printed so far. */
  logs(): string {
    return readFileSync(this.logFile, 'utf8');
  }

  /** `runc state`: status and the host pid of the container's process. */
  async state(): Promise<{ status: string; pid: number }> {
    const r = await exec('runc', ['--root', RUNC_ROOT, 'state', this.id]);
    if (r.code !== 0) return { status: 'gone', pid: 0 };
    return JSON.parse(r.stdout) as { status: string; pid: number };
  }

  /** A command in the container, with its user, capabilities and root (`runc exec`). */
  exec(args: string[]): Promise<RunResult> {
    return exec('runc', ['--root', RUNC_ROOT, 'exec', this.id, ...args]);
  }

  /** SIGKILL to every process of the container, then removes it (what a container restart does to it). */
  async stop(): Promise<void> {
    await exec('runc', ['--root', RUNC_ROOT, 'kill', '--all', this.id, 'KILL']);
    for (let i = 0; i < 100 && (await this.state()).status === 'running'; i++)
      await new Promise((r) => setTimeout(r, 100));
    await exec('runc', ['--root', RUNC_ROOT, 'delete', '--force', this.id]);
  }
}
