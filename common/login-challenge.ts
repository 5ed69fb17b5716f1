/**
 * The text of a login challenge, shared by the controller that writes it and `peerops login` that signs
 * it: the client signs nothing but exactly this text, for the host it talks to, so a server cannot make
 * it sign another service's challenge (a relayed login) or arbitrary bytes (a git commit, say).
 */
export const CHALLENGE_HEADER = 'peerops login challenge';
/** The SSH signature namespace (`ssh-keygen -Y sign -n`); fixed, never taken from a server's answer. */
export const SSH_NAMESPACE = 'peerops';

export interface ChallengeFields {
  host: string;
  asn: number;
  /** base64url of 32 random bytes. */
  nonce: string;
  /** Unix milliseconds. */
  expiresAt: number;
}

export function challengeText(f: ChallengeFields): string {
  return [
    CHALLENGE_HEADER,
    `host: ${f.host}`,
    `asn: ${f.asn}`,
    `nonce: ${f.nonce}`,
    `expires: ${new Date(f.expiresAt).toISOString()}`,
    '',
  ].join('\n');
}

const STRICT = new RegExp(
  `^${CHALLENGE_HEADER}\\nhost: ([A-Za-z0-9.:\\[\\]-]{1,253})\\nasn: ([0-9]{1,10})\\n` +
    `nonce: ([A-Za-z0-9_-]{43})\\nexpires: ([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{8,12}Z)\\n$`,
);

/** The fields of a text that is exactly what challengeText writes; undefined for anything else. */
export function parseChallengeText(text: string): ChallengeFields | undefined {
  const m = STRICT.exec(text);
  if (!m) return undefined;
  const fields = {
    host: m[1] ?? '',
    asn: Number(m[2]),
    nonce: m[3] ?? '',
    expiresAt: Date.parse(m[4] ?? ''),
  };
  return challengeText(fields) === text ? fields : undefined;
}
