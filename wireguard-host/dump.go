package main

// `peerops-wireguard --dump`: every tunnel of the host in the format of `wg show all dump`, from one
// request. wg(8) asks each tunnel's UAPI socket in turn, which took 0.8 s at 1,000 tunnels, most of an
// agent pass that changes nothing (docs/agent.md, "peerops-wireguard").

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// dump writes every tunnel, sorted by name, as `wg show all dump` does, except that the private key
// column says "(hidden)": whoever reads the dump needs the public key, never the private one.
func (h *host) dump() string {
	// the devices are asked outside the lock: a tunnel being added meanwhile waits for nothing
	h.mu.Lock()
	tunnels := maps.Clone(h.tunnels)
	h.mu.Unlock()
	var out strings.Builder
	for _, name := range slices.Sorted(maps.Keys(tunnels)) {
		t := tunnels[name]
		uapi, err := t.dev.IpcGet()
		if err != nil {
			continue // closing: it is gone from the next dump
		}
		dumpLines(&out, name, uapi, t.publicKey)
	}
	return out.String()
}

// dumpLines turns one device's UAPI `get` answer (key=value lines, keys in hex) into dump lines: the
// interface's, then one per peer. `public` gives the public key of a private one.
func dumpLines(out *strings.Builder, name, uapi string, public func(privateHex string) string) {
	type peer struct {
		publicKey, presharedKey, endpoint string
		allowed                           []string
		handshake, rx, tx, keepalive      string
	}
	var (
		publicKey, listenPort, fwmark = "(none)", "0", "off"
		private                       = "(none)"
		peers                         []*peer
	)
	s := bufio.NewScanner(strings.NewReader(uapi))
	for s.Scan() {
		key, value, _ := strings.Cut(s.Text(), "=")
		var p *peer
		if len(peers) > 0 {
			p = peers[len(peers)-1]
		}
		switch key {
		case "private_key":
			private = "(hidden)"
			publicKey = public(value)
		case "listen_port":
			listenPort = value
		case "fwmark":
			fwmark = value
		case "public_key":
			peers = append(peers, &peer{publicKey: b64(value), presharedKey: "(none)", endpoint: "(none)", handshake: "0", rx: "0", tx: "0", keepalive: "off"})
		case "preshared_key":
			if p != nil && strings.Trim(value, "0") != "" {
				p.presharedKey = b64(value)
			}
		case "endpoint":
			if p != nil {
				p.endpoint = value
			}
		case "allowed_ip":
			if p != nil {
				p.allowed = append(p.allowed, value)
			}
		case "last_handshake_time_sec":
			if p != nil {
				p.handshake = value
			}
		case "rx_bytes":
			if p != nil {
				p.rx = value
			}
		case "tx_bytes":
			if p != nil {
				p.tx = value
			}
		case "persistent_keepalive_interval":
			if p != nil && value != "0" {
				p.keepalive = value
			}
		}
	}
	fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\n", name, private, publicKey, listenPort, fwmark)
	for _, p := range peers {
		allowed := "(none)"
		if len(p.allowed) > 0 {
			allowed = strings.Join(p.allowed, ",")
		}
		fmt.Fprintf(out, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			name, p.publicKey, p.presharedKey, p.endpoint, allowed, p.handshake, p.rx, p.tx, p.keepalive)
	}
}

// b64 re-encodes a hex key (UAPI's form) in base64 (wg's); a malformed one is returned as it came.
func b64(hexKey string) string {
	raw, err := hex.DecodeString(hexKey)
	if err != nil || len(raw) != 32 {
		return hexKey
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// publicKey is the public key of the tunnel's private key (hex), in base64, worked out again only when
// the private key changed: a scalar multiplication per tunnel made a dump of 1,000 tunnels take 0.2 s.
func (t *tunnel) publicKey(privateHex string) string {
	if known := t.derived.Load(); known != nil && known[0] == privateHex {
		return known[1]
	}
	public := publicOf(privateHex)
	t.derived.Store(&[2]string{privateHex, public})
	return public
}

// publicOf is the public key of a hex private key, in base64.
func publicOf(hexKey string) string {
	raw, err := hex.DecodeString(hexKey)
	if err != nil || len(raw) != 32 {
		return "(none)"
	}
	pub, err := curve25519.X25519(raw, curve25519.Basepoint)
	if err != nil {
		return "(none)"
	}
	return base64.StdEncoding.EncodeToString(pub)
}
