package main

// Table tests of the control protocol between `peerops-wireguard <command>` and the host: the requests
// the command writes (configuredRequest, exchange) and the host's answers (serve), over a real Unix socket
// in the abstract namespace under a name of the test's own. Adding a tunnel for real needs a TUN and
// root: test/agent/wireguard-host.test.ts does that with the built program.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

var socketCount atomic.Int32

// serveHost answers every connection to a fresh abstract socket with h.serve; returns its address.
func serveHost(t *testing.T, h *host) string {
	t.Helper()
	addr := fmt.Sprintf("@peerops-wireguard-test-%d-%d", os.Getpid(), socketCount.Add(1))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			go h.serve(c)
		}
	}()
	return addr
}

func dial(t *testing.T, addr string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestControlProtocol(t *testing.T) {
	carrying := &host{tunnels: map[string]*tunnel{
		"wg_20002": nil,
		"wg_20001": {dev: newDevice(t, "private_key="+alicePrivateHex+"\npublic_key="+bobPublicHex+"\nallowed_ip=::/0\n")},
	}}
	empty := &host{tunnels: map[string]*tunnel{}}
	cases := []struct {
		name    string
		host    *host
		request string
		reply   string // the data after "ok"; unused when err is set
		err     string
	}{
		{name: "list, no tunnel", host: empty, request: "list", reply: ""},
		{name: "list, sorted", host: &host{tunnels: map[string]*tunnel{"wgm_2": nil, "wg_1": nil}}, request: "list", reply: "wg_1\nwgm_2\n"},
		{name: "dump, no tunnel", host: empty, request: "dump", reply: ""},
		{
			name: "dump", host: &host{tunnels: map[string]*tunnel{"wg_20001": carrying.tunnels["wg_20001"]}}, request: "dump",
			reply: "wg_20001\t(hidden)\t" + alicePublic + "\t", // the port is the in-memory bind's (dump_test.go)
		},
		{name: "an unknown request", host: empty, request: "frobnicate", err: `unknown request "frobnicate\n"`},
		{name: "add without a name", host: empty, request: "add", err: `unknown request "add\n"`},
		{name: "add, a name with a slash", host: empty, request: "add ../x", err: `unknown request "add ../x\n"`},
		{name: "add, the name ..", host: empty, request: "add ..", err: `unknown request "add ..\n"`},
		{name: "add, a name over 15 bytes", host: empty, request: "add wg_0123456789abc", err: `unknown request "add wg_0123456789abc\n"`},
		{name: "add, a name the host carries", host: carrying, request: "add wg_20002", err: "this host already carries that interface"},
		{
			name: "add-configured, a name the host carries", host: carrying,
			request: configuredRequest("wg_20001", "private_key="+alicePrivateHex+"\n"),
			err:     "this host already carries that interface",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reply, err := exchange(dial(t, serveHost(t, c.host)), c.request)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if !strings.HasPrefix(reply, c.reply) || (c.request != "dump" && reply != c.reply) {
				t.Errorf("reply %q, want %q", reply, c.reply)
			}
		})
	}
}

// Settings the command never ends with their empty line: the host answers with the reason, not a tunnel.
func TestControlProtocolSettingsCutShort(t *testing.T) {
	c := dial(t, serveHost(t, &host{tunnels: map[string]*tunnel{}}))
	fmt.Fprint(c, "add-configured wg_1\nprivate_key="+alicePrivateHex+"\n")
	c.CloseWrite()
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || status != "error reading the settings: EOF\n" {
		t.Fatalf("status %q (%v)", status, err)
	}
}

func TestExchangeReadsTheHostsReply(t *testing.T) {
	cases := []struct {
		name, answer, reply string
		err                 error
	}{
		{name: "ok", answer: "ok\n", reply: ""},
		{name: "ok with data", answer: "ok\nwg_1\nwg_2\n", reply: "wg_1\nwg_2\n"},
		{name: "an error", answer: "error a link with that name already exists\n", err: errors.New("a link with that name already exists")},
		{name: "closed before the status", answer: "", err: errNoHost},
		{name: "closed mid-status", answer: "o", err: errNoHost},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			got := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(server).ReadString('\n')
				got <- line
				fmt.Fprint(server, c.answer)
				server.Close()
			}()
			reply, err := exchange(client, "list")
			if sent := <-got; sent != "list\n" {
				t.Errorf("sent %q", sent)
			}
			switch {
			case c.err == nil && err != nil:
				t.Fatalf("error %v", err)
			case c.err != nil && (err == nil || (err.Error() != c.err.Error() && !errors.Is(err, c.err))):
				t.Fatalf("error %v, want %v", err, c.err)
			case reply != c.reply:
				t.Errorf("reply %q, want %q", reply, c.reply)
			}
		})
	}
}

func TestConfiguredRequest(t *testing.T) {
	cases := []struct{ name, input, want string }{
		{"lines as given", "private_key=ab\nlisten_port=1\n", "add-configured wg_1\nprivate_key=ab\nlisten_port=1\n"},
		{"blank lines and spaces dropped", "\n  private_key=ab  \r\n\n\nlisten_port=1", "add-configured wg_1\nprivate_key=ab\nlisten_port=1\n"},
		{"nothing", "", "add-configured wg_1\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := configuredRequest("wg_1", c.input)
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			// what the host reads back: exchange ends the request with a newline, which ends the settings
			r := bufio.NewReader(strings.NewReader(got + "\n"))
			r.ReadString('\n')
			settings, err := readSettings(r)
			if err != nil || settings != strings.TrimPrefix(c.want, "add-configured wg_1\n") {
				t.Errorf("the host reads %q (%v)", settings, err)
			}
		})
	}
}

func TestReadSettings(t *testing.T) {
	cases := []struct {
		name, input, want string
		eof               bool
	}{
		{name: "up to the empty line", input: "a=1\nb=2\n\nnext request\n", want: "a=1\nb=2\n"},
		{name: "a line of spaces ends them too", input: "a=1\n  \n", want: "a=1\n"},
		{name: "none", input: "\n", want: ""},
		{name: "no end", input: "a=1\n", eof: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readSettings(bufio.NewReader(strings.NewReader(c.input)))
			if c.eof {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

func TestValidInterfaceName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"wg_20001", true},
		{"wgm_2", true},
		{"a", true},
		{"wg0=+.-_", true},
		{"wg_012345678901", true}, // 15 bytes
		{"wg_0123456789012", false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"wg/0", false},
		{"wg 0", false},
		{"wg0\n", false},
		{"wgé", false},
	}
	for _, c := range cases {
		if got := validInterfaceName(c.name); got != c.ok {
			t.Errorf("validInterfaceName(%q) = %v, want %v", c.name, got, c.ok)
		}
	}
}
