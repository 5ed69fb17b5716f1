package main

// Table tests of `--dump`'s parsing: UAPI `get` answers, from a real wireguard-go device (the library the
// host runs, on an in-memory TUN and bind) and written by hand for what a device never says, turned
// into the lines `wg show all dump` prints.

import (
	"strings"
	"testing"

	"golang.zx2c4.com/wireguard/conn/bindtest"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// RFC 7748's X25519 test vectors (section 6.1): Alice's and Bob's keys, in UAPI's hex and wg's base64.
const (
	alicePrivateHex = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
	alicePublicHex  = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
	alicePublic     = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
	bobPublicHex    = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
	bobPublic       = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08="
	bobPrivateHex   = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"
	bobPrivate      = "XasIfmJKikt54X+Lg4AO5m87sSkmGLb9HC+LJ/+I4Os="
)

// newDevice is a wireguard-go device on an in-memory TUN and bind, configured with UAPI `set` lines.
func newDevice(t *testing.T, settings string) *device.Device {
	t.Helper()
	dev := device.NewDevice(tuntest.NewChannelTUN().TUN(), bindtest.NewChannelBinds()[0], device.NewLogger(device.LogLevelSilent, ""))
	t.Cleanup(dev.Close)
	if err := dev.IpcSet(settings); err != nil {
		t.Fatalf("IpcSet: %v", err)
	}
	return dev
}

func TestDumpLinesOfADevice(t *testing.T) {
	cases := []struct {
		name     string
		settings string
		want     []string
	}{
		{
			name:     "no key, no peer",
			settings: "listen_port=51820\n",
			want:     []string{"wg0\t(none)\t(none)\t{port}\toff"},
		},
		{
			name:     "a key and a fwmark",
			settings: "private_key=" + alicePrivateHex + "\nlisten_port=20001\nfwmark=51\n",
			want:     []string{"wg0\t(hidden)\t" + alicePublic + "\t{port}\t51"},
		},
		{
			name: "a session's peer: endpoint, every destination, keepalive",
			settings: "private_key=" + alicePrivateHex + "\nlisten_port=20001\npublic_key=" + bobPublicHex +
				"\nendpoint=127.0.0.1:51821\nallowed_ip=0.0.0.0/0\nallowed_ip=::/0\npersistent_keepalive_interval=25\n",
			want: []string{
				"wg0\t(hidden)\t" + alicePublic + "\t{port}\toff",
				"wg0\t" + bobPublic + "\t(none)\t127.0.0.1:51821\t0.0.0.0/0,::/0\t0\t0\t0\t25",
			},
		},
		{
			name: "a peer behind NAT: no endpoint, no allowed IP, a preshared key",
			settings: "private_key=" + alicePrivateHex + "\nlisten_port=20002\npublic_key=" + bobPublicHex +
				"\npreshared_key=" + alicePublicHex + "\n",
			want: []string{
				"wg0\t(hidden)\t" + alicePublic + "\t{port}\toff",
				"wg0\t" + bobPublic + "\t" + alicePublic + "\t(none)\t(none)\t0\t0\t0\toff",
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uapi, err := newDevice(t, c.settings).IpcGet()
			if err != nil {
				t.Fatalf("IpcGet: %v", err)
			}
			// the in-memory bind picks its own port once the device is up: the port is the one it reports
			_, port, _ := strings.Cut(uapi, "listen_port=")
			port, _, _ = strings.Cut(port, "\n")
			want := strings.ReplaceAll(strings.Join(c.want, "\n")+"\n", "{port}", port)
			var out strings.Builder
			dumpLines(&out, "wg0", uapi, publicOf)
			if out.String() != want {
				t.Errorf("dump of\n%s\ngot\n%swant\n%s", uapi, out.String(), want)
			}
		})
	}
}

func TestDumpLinesOfAnswersNoDeviceGives(t *testing.T) {
	cases := []struct {
		name, uapi string
		want       []string
	}{
		{"empty", "", []string{"wg0\t(none)\t(none)\t0\toff"}},
		{
			// a peer's fields before any public_key have no peer to go to
			"fields before the first peer", "endpoint=10.0.0.1:1\nallowed_ip=::/0\nrx_bytes=5\n",
			[]string{"wg0\t(none)\t(none)\t0\toff"},
		},
		{
			"a key that is not hex stays as it came", "public_key=zz\nrx_bytes=7\ntx_bytes=9\nlast_handshake_time_sec=1700000000\n",
			[]string{"wg0\t(none)\t(none)\t0\toff", "wg0\tzz\t(none)\t(none)\t(none)\t1700000000\t7\t9\toff"},
		},
		{
			"an all-zero preshared key is none", "public_key=" + bobPublicHex + "\npreshared_key=" + strings.Repeat("0", 64) + "\n",
			[]string{"wg0\t(none)\t(none)\t0\toff", "wg0\t" + bobPublic + "\t(none)\t(none)\t(none)\t0\t0\t0\toff"},
		},
		{
			"unknown keys are skipped", "protocol_version=1\nerrno=0\nlisten_port=7\n",
			[]string{"wg0\t(none)\t(none)\t7\toff"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			dumpLines(&out, "wg0", c.uapi, publicOf)
			if got, want := out.String(), strings.Join(c.want, "\n")+"\n"; got != want {
				t.Errorf("got\n%swant\n%s", got, want)
			}
		})
	}
}

func TestPublicOf(t *testing.T) {
	cases := []struct{ private, want string }{
		{alicePrivateHex, alicePublic},
		{bobPrivateHex, bobPublic},
		{"not hex", "(none)"},
		{"abcd", "(none)"}, // hex, but not 32 bytes
	}
	for _, c := range cases {
		if got := publicOf(c.private); got != c.want {
			t.Errorf("publicOf(%q) = %q, want %q", c.private, got, c.want)
		}
	}
	if got := b64(bobPrivateHex); got != bobPrivate {
		t.Errorf("b64 = %q, want %q", got, bobPrivate)
	}
}

// A tunnel's public key is worked out once per private key, and again when the key changes.
func TestTunnelPublicKeyFollowsTheKey(t *testing.T) {
	var tun tunnel
	for _, c := range []struct{ private, want string }{
		{alicePrivateHex, alicePublic},
		{alicePrivateHex, alicePublic},
		{bobPrivateHex, bobPublic},
	} {
		if got := tun.publicKey(c.private); got != c.want {
			t.Errorf("publicKey(%s…) = %q, want %q", c.private[:8], got, c.want)
		}
	}
}
