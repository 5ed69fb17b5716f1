/**
 * The router's loopback addresses, which BGP sessions over the mesh start from and kernel routes use as
 * preferred source, live on a dummy link of their own (`peerops_lo`) so they exist whatever tunnel is
 * up; addresses of an old loopback are removed from it. Where the kernel has no dummy links they go on
 * `lo`, where only missing ones are added (lo holds addresses that are not ours).
 */
import { run, runOk } from '../system/exec.ts';

export const LOOPBACK_INTERFACE = 'peerops_lo';

interface IpAddr {
  flags?: string[];
  addr_info?: { local: string; prefixlen: number }[];
}

/** Resolves with the link used and what was changed. */
export async function ensureLoopback(loopback: {
  ipv4?: string;
  ipv6?: string;
}): Promise<{ link: string; changes: string[] }> {
  const changes: string[] = [];
  let link = LOOPBACK_INTERFACE;
  let info = await readLink(link);
  if (!info) {
    const add = await run('ip', ['link', 'add', 'dev', link, 'type', 'dummy']);
    if (add.code === 0) changes.push(`created ${link}`);
    else link = 'lo';
    info = await readLink(link);
  }
  const owned = link === LOOPBACK_INTERFACE;
  const have = new Set((info?.addr_info ?? []).map((a) => `${a.local}/${a.prefixlen}`));
  const want = [
    ...(loopback.ipv4 ? [`${loopback.ipv4}/32`] : []),
    ...(loopback.ipv6 ? [`${loopback.ipv6}/128`] : []),
  ];
  if (owned) {
    for (const addr of have) {
      if (!want.includes(addr) && !addr.startsWith('fe80:')) {
        await runOk('ip', ['addr', 'del', addr, 'dev', link]);
        changes.push(`del ${addr}`);
      }
    }
  }
  for (const addr of want) {
    if (!have.has(addr)) {
      await runOk('ip', ['addr', 'add', addr, 'dev', link, ...(addr.includes(':') ? ['nodad'] : [])]);
      changes.push(`add ${addr}`);
    }
  }
  if (!info?.flags?.includes('UP')) {
    await runOk('ip', ['link', 'set', 'dev', link, 'up']);
    changes.push(`${link} up`);
  }
  return { link, changes };
}

async function readLink(name: string): Promise<IpAddr | undefined> {
  const r = await run('ip', ['-j', 'addr', 'show', 'dev', name]);
  return r.code === 0 ? (JSON.parse(r.stdout) as IpAddr[])[0] : undefined;
}
