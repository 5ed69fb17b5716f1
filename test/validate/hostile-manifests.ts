/** Manifests built to hurt a reader (docs/store.md, "What the store refuses"), shared by the validate, hook and store tests. */
/**
 * A session for router fra1 of test/fixtures/validate/good, AS4242420099 at
 * sessions/fra1/as4242420099.yaml; `metadata` goes on line 5, `spec` at the end of the spec.
 */
export function sessionYaml(metadata = '', spec = ''): string {
  return [
    'apiVersion: peerops.dev/v1alpha1',
    'kind: PeeringSession',
    'metadata:',
    '  name: as4242420099-fra1',
    `${metadata}spec:`,
    '  asn: 4242420099',
    '  router: fra1',
    '  ipv6: fd42:3199::1',
    '  linkLocal: fe80::3199',
    '  publicKey: Bhp76i0BC1Q9fWP2M6/HDhC4MI0BBislXJpadczcIgE=',
    `${spec}`,
  ].join('\n');
}

/**
 * The billion laughs in that session's metadata: `levels` anchors, each a list of 9 aliases of the one
 * before, so 9^levels strings in about 650 bytes (at 9 levels). A reader that builds or walks the values
 * runs out of heap; anchor &a0 sits on line 5.
 */
export function aliasBomb(levels: number): string {
  const lines = ['  x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
  for (let i = 1; i < levels; i++)
    lines.push(
      `  x${i}: &a${i} [${Array(9)
        .fill(`*a${i - 1}`)
        .join(', ')}]`,
    );
  return sessionYaml(`${lines.join('\n')}\n`);
}
