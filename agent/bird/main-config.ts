/**
 * Routing policy → the whole BIRD main config (docs/routing-policy.md). Pure: the same policy
 * renders the same text, so the reconcile loop can compare it with the file on disk. Every value comes
 * from the policy after validation against BirdConfigResponse and canonicalisation; no free text reaches
 * BIRD. Per-session and iBGP protocols live in included files and use the names of names.ts.
 */
import path from 'node:path';
import { BirdConfigResponse, FALLBACK_RPKI_SERVER } from '../../common/agent-api.ts';
import { birdConnectTimers } from '../../common/bgp-timers.ts';
import { canonicalPrefix, isIpv4, isIpv6 } from '../../common/net.ts';
import { validateOrThrow } from '../../common/validate.ts';
import { renderCommunityFunctions } from './communities.ts';
import { renderNetworkFilter } from './network-filter.ts';
import { BIRD_NAMES } from './names.ts';

export interface MainConfigPaths {
  peerConfDir: string;
  ibgpConfDir: string;
  meshConfDir?: string;
  controlSocket?: string;
}

export interface MainConfigOptions {
  /** Mesh tunnel interfaces Babel runs on; without it Babel matches every `wgm_*` interface. */
  meshInterfaces?: string[];
}

/** ROA tables the RPKI protocols fill and the import filter checks. */
export const ROA_TABLES = { ipv4: 'dn42_roa4', ipv6: 'dn42_roa6' } as const;
/** Babel protocol carrying the routers' loopbacks over the mesh tunnels. */
export const BABEL_PROTOCOL = 'mesh_babel';
/** Filter functions the iBGP channels (ibgp.ts) use. */
export const IBGP_FILTERS = { import: 'ibgp_import_filter', export: 'ibgp_export_filter' } as const;
const MESH_INTERFACE_PATTERN = 'wgm_*';

/** Where the operator's own BIRD additions go: `<config root>/local.d/*.conf`, next to peerConfDir. */
export function localConfDir(paths: Pick<MainConfigPaths, 'peerConfDir'>): string {
  return path.join(path.dirname(path.resolve(paths.peerConfDir)), 'local.d');
}

export function renderMainConfig(
  policy: BirdConfigResponse,
  paths: MainConfigPaths,
  opts: MainConfigOptions = {},
): string {
  const p = validateOrThrow<BirdConfigResponse>(BirdConfigResponse, policy, 'routing policy');
  const meshInterfaces = opts.meshInterfaces ?? [];
  for (const name of meshInterfaces) {
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(name)) throw new Error(`mesh interface name '${name}' is not valid`);
  }
  for (const dir of [paths.peerConfDir, paths.ibgpConfDir, paths.meshConfDir]) {
    if (dir !== undefined && !/^[A-Za-z0-9_./ -]+$/.test(dir)) {
      throw new Error(`BIRD config path '${dir}' has characters BIRD cannot include`);
    }
  }
  const own4 = p.ownPrefixes.ipv4.map(canonicalPrefix);
  const own6 = p.ownPrefixes.ipv6.map(canonicalPrefix);
  const lo4 = p.loopback.ipv4;
  const lo6 = p.loopback.ipv6;
  const names = BIRD_NAMES;

  const sections: string[] = [];
  sections.push(`# Rendered by peerops from the routing policy; changes here are overwritten.
# Add your own configuration in ${localConfDir(paths)}/*.conf.

define ${names.ownAs} = ${p.dn42Asn};
${lo4 ? `define ${names.ownIp} = ${lo4};\n` : ''}${lo6 ? `define ${names.ownIpv6} = ${lo6};\n` : ''}
router id ${p.routerId};

protocol device {
  scan time 10;
}`);

  sections.push(`${renderNetworkFilter(p.filter)}

function is_self_net() {
${selfNetBody(own4, own6)}
}`);

  const servers = p.rpkiServers.length > 0 ? p.rpkiServers : [FALLBACK_RPKI_SERVER];
  sections.push(`# RPKI${p.rpkiServers.length === 0 ? ' (the policy lists no server: built-in fallback)' : ''}
roa4 table ${ROA_TABLES.ipv4};
roa6 table ${ROA_TABLES.ipv6};
${servers
  .map(
    (s, i) => `
protocol rpki rpki${i + 1} {
  roa4 { table ${ROA_TABLES.ipv4}; };
  roa6 { table ${ROA_TABLES.ipv6}; };
  remote ${rpkiRemote(s.host)} port ${s.port};
  retry keep 90;
  refresh keep 900;
  expire keep 172800;
}`,
  )
  .join('\n')}

function is_roa_invalid() {
  if net.type = NET_IP4 then return roa_check(${ROA_TABLES.ipv4}, net, bgp_path.last) = ROA_INVALID;
  if net.type = NET_IP6 then return roa_check(${ROA_TABLES.ipv6}, net, bgp_path.last) = ROA_INVALID;
  return false;
}`);

  const c = p.communities;
  if (c.enabled) sections.push(renderCommunityFunctions());

  const originate =
    c.enabled && c.region !== null
      ? `    if source = RTS_STATIC then bgp_community.add((64511, ${c.region}));\n`
      : '';
  sections.push(`# eBGP filters. Per-session files pass the link's properties: latency from the measured RTT,
# bandwidth and crypto from the policy${c.enabled ? '' : ' (DN42 communities are off in the policy: passed through untouched)'}.
function ${names.importFilter}(int link_latency; int link_bandwidth; int link_crypto) {
  if !is_valid_network() || is_self_net() then reject;
  if is_roa_invalid() then {
    print "[peerops] ROA invalid: ", net, " from AS", bgp_path.last;
    reject;
  }
${c.enabled ? '  update_flags(link_latency, link_bandwidth, link_crypto);\n' : ''}  accept;
}

function ${names.exportFilter}(int link_latency; int link_bandwidth; int link_crypto) {
  if !is_valid_network() then reject;
  if source !~ [RTS_STATIC, RTS_BGP] then reject;
  if source = RTS_STATIC && !is_self_net() then reject;
${c.enabled ? `${originate}  update_flags(link_latency, link_bandwidth, link_crypto);\n` : ''}  accept;
}`);

  sections.push(renderOrigination(own4, own6, lo4, lo6));
  sections.push(renderKernel(lo4, lo6));

  const defaultBandwidth = c.bandwidth;
  const defaultCrypto = c.crypto;
  const limit = p.importLimit;
  const connectTimers = birdConnectTimers()
    .map((line) => `  ${line}`)
    .join('\n');
  sections.push(`# eBGP sessions (${paths.peerConfDir}/*.conf) inherit from this template.
# Routes the import filter rejects are kept aside (not used, not exported) so that the looking glass can
# show them with the filter's verdict (docs/routing-policy.md); the import limit counts only accepted ones.
template bgp ${names.ebgpTemplate} {
  local as ${names.ownAs};
  path metric 1;
  enforce first as on;
  # the router connects, soon and again: a new or restarted session's BGP comes up within seconds of
  # its tunnel, and a peer back after an error is not refused for BIRD's minute (docs/routing-policy.md)
  passive off;
${connectTimers}
  ipv4 {
    import limit ${limit.ipv4} action ${limit.action};
    import keep filtered on;
    import where ${names.importFilter}(9, ${defaultBandwidth}, ${defaultCrypto});
    export where ${names.exportFilter}(9, ${defaultBandwidth}, ${defaultCrypto});
  };
  ipv6 {
    import limit ${limit.ipv6} action ${limit.action};
    import keep filtered on;
    import where ${names.importFilter}(9, ${defaultBandwidth}, ${defaultCrypto});
    export where ${names.exportFilter}(9, ${defaultBandwidth}, ${defaultCrypto});
  };
}

# iBGP sessions over the loopbacks (${paths.ibgpConfDir}/*.conf) inherit from this template and add
# their channels (ibgp.ts): next hop self, resolved recursively through the Babel routes.
template bgp ${names.ibgpTemplate} {
  local as ${names.ownAs};
  multihop;
  # the loopbacks become reachable once Babel converges: retry soon rather than after BIRD's 120 s
  connect retry time 5;
}

function ${IBGP_FILTERS.import}() {
  return is_valid_network() && !is_self_net();
}

function ${IBGP_FILTERS.export}() {
  return source = RTS_BGP && is_valid_network();
}`);

  sections.push(renderBabel(meshInterfaces, lo4, lo6));

  const includes = [
    `include "${paths.peerConfDir}/*.conf";`,
    `include "${paths.ibgpConfDir}/*.conf";`,
    ...(paths.meshConfDir ? [`include "${paths.meshConfDir}/*.conf";`] : []),
    `include "${localConfDir(paths)}/*.conf";`,
  ];
  sections.push(`# Sessions, iBGP, mesh and the operator's own additions
${includes.join('\n')}`);

  return `${sections.join('\n\n')}\n`;
}

function selfNetBody(own4: string[], own6: string[]): string {
  const lines: string[] = [];
  if (own4.length > 0)
    lines.push(`  if net.type = NET_IP4 then return net ~ [ ${own4.map((n) => `${n}+`).join(', ')} ];`);
  if (own6.length > 0)
    lines.push(`  if net.type = NET_IP6 then return net ~ [ ${own6.map((n) => `${n}+`).join(', ')} ];`);
  lines.push('  return false;');
  return lines.join('\n');
}

/** An IP literal is written bare, a host name quoted (validated: letters, digits, dots, hyphens only). */
function rpkiRemote(host: string): string {
  return isIpv4(host) || isIpv6(host) ? host : `"${host}"`;
}

/** Own prefixes are originated as unreachable statics (exported to eBGP); loopbacks feed Babel. */
function renderOrigination(own4: string[], own6: string[], lo4?: string, lo6?: string): string {
  const out = ['# Own prefixes and loopbacks'];
  if (own4.length > 0) {
    out.push(
      `protocol static own_prefixes4 {\n  ipv4;\n${own4.map((n) => `  route ${n} unreachable;`).join('\n')}\n}`,
    );
  }
  if (own6.length > 0) {
    out.push(
      `protocol static own_prefixes6 {\n  ipv6;\n${own6.map((n) => `  route ${n} unreachable;`).join('\n')}\n}`,
    );
  }
  if (lo4) out.push(`protocol static loopback4 {\n  ipv4;\n  route ${lo4}/32 blackhole;\n}`);
  if (lo6) out.push(`protocol static loopback6 {\n  ipv6;\n  route ${lo6}/128 blackhole;\n}`);
  if (out.length === 1) out.push('# (none in the policy)');
  return out.join('\n\n');
}

/** Learned routes go to the kernel with the loopback as preferred source; local statics stay in BIRD. */
function renderKernel(lo4?: string, lo6?: string): string {
  const kernel = (family: 'ipv4' | 'ipv6', src: string | undefined) => `protocol kernel kernel_${family} {
  scan time 20;
  ${family} {
    import none;
    export filter {
      if source = RTS_STATIC then reject;
${src ? `      krt_prefsrc = ${src};\n` : ''}      accept;
    };
  };
}`;
  return `# Kernel routing table\n${kernel('ipv4', lo4 ? BIRD_NAMES.ownIp : undefined)}\n\n${kernel(
    'ipv6',
    lo6 ? BIRD_NAMES.ownIpv6 : undefined,
  )}`;
}

/** Babel on the mesh tunnels carries only host routes: the routers' loopbacks. */
function renderBabel(meshInterfaces: string[], lo4?: string, lo6?: string): string {
  const patterns =
    meshInterfaces.length > 0
      ? meshInterfaces.map((n) => `"${n}"`).join(', ')
      : `"${MESH_INTERFACE_PATTERN}"`;
  return `# Mesh IGP: Babel over the mesh tunnels carries the routers' loopbacks
function is_valid_network_v4_host() {
  return net ~ [ 172.20.0.0/14+, 172.31.0.0/16+, 10.0.0.0/8+ ];
}

function is_valid_network_v6_host() {
  return net ~ [ fd00::/8+ ];
}

protocol babel ${BABEL_PROTOCOL} {
  ipv4 {
    import where net.len = 32 && is_valid_network_v4_host();
    export where ${lo4 ? `proto = "loopback4"` : 'false'};
  };
  ipv6 {
    import where net.len = 128 && is_valid_network_v6_host();
    export where ${lo6 ? `proto = "loopback6"` : 'false'};
  };
  interface ${patterns} {
    type wired;
  };
}`;
}
