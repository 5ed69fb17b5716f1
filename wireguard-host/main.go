// peerops-wireguard hosts every userspace WireGuard tunnel of a router in one process.
//
// `wireguard-go <ifname>` starts one daemon per tunnel: two Go program starts per tunnel set up, a dozen
// threads and a socket to ask per tunnel on every `wg show all dump` (docs/agent.md, "What wireguard-go
// costs"). This program keeps wireguard-go's command contract, so the agent, wg(8) and ip(8) use it
// unchanged, but every tunnel lives in one long-running host process built on the wireguard-go library:
//
//	peerops-wireguard <ifname>   exit 0 once the link exists and /var/run/wireguard/<ifname>.sock answers
//	peerops-wireguard --configured <ifname>
//	                             the same, with the UAPI `set` lines read from stdin (private_key=…,
//	                             listen_port=…, public_key=…) applied before it exits: a tunnel with its
//	                             keys and peer for one program run instead of two (this, then `wg set`)
//	peerops-wireguard --list     the interfaces the host of this network namespace carries
//	peerops-wireguard --dump     every tunnel of that host as `wg show all dump` prints it (private keys hidden)
//	peerops-wireguard --version
//	peerops-wireguard --host     the host itself (started by the first command that finds none)
//	peerops-wireguard --serve    the host in the foreground for a supervisor, logging to stdout and
//	                             staying without tunnels (the agent image's WireGuard keeper)
//
// The command asks the host over a control socket; when none answers it starts one (detached: its own
// session, output to a log file), so the host outlives the caller and an agent restart. With
// PEEROPS_WIREGUARD_KEEPER set (the agent's container beside the keeper's) it starts none: it waits for
// the keeper's, whose tunnels outlive the agent's container. The control
// socket is an abstract Unix socket: those belong to a network namespace, so each namespace (a router
// running its routing in one, or a test) has its own host without any file naming it.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
)

const (
	// wireguard-go's socket directory, where wg(8) looks for <ifname>.sock.
	runDir = "/var/run/wireguard"
	// "@" makes Go use the abstract namespace: the name is per network namespace, and vanishes with the host.
	controlSocket = "@peerops-wireguard"
	logPath       = runDir + "/peerops-wireguard.log"
	// Held while a command starts a host, so that parallel tunnel starts launch one host, not one each.
	startLockPath = runDir + "/peerops-wireguard.start.lock"
	// A host is up within milliseconds; this bounds a wedged start on a saturated machine.
	startTimeout = 15 * time.Second
	// A reply to `add` covers creating a TUN and a device: bounded generously for a loaded host.
	requestTimeout = 30 * time.Second
)

// Linux interface names: at most 15 bytes; these characters are all the agent and wg-quick use, and none of
// them can form a path (the name becomes a socket file name).
var validName = regexp.MustCompile(`^[A-Za-z0-9_=+.-]{1,15}$`)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "--configured" {
		addConfigured(os.Args[2])
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: %s <interface name> | --configured <interface name> | --list | --dump | --version | --host | --serve\n", filepath.Base(os.Args[0]))
		os.Exit(2)
	}
	switch arg := os.Args[1]; arg {
	case "--version":
		fmt.Printf("peerops-wireguard (wireguard-go library %s)\n", libraryVersion())
	case "--host":
		os.Exit(runHost(false))
	case "--serve":
		os.Exit(runHost(true))
	case "--list":
		reply, err := ask("list", false)
		if err != nil {
			fail("%v", err)
		}
		fmt.Print(reply)
	case "--dump":
		reply, err := ask("dump", false)
		if errors.Is(err, errNoHost) {
			return // no host: no tunnel to show
		}
		if err != nil {
			fail("%v", err)
		}
		fmt.Print(reply)
	default:
		checkName(arg)
		if _, err := ask("add "+arg, true); err != nil {
			fail("%s: %v", arg, err)
		}
	}
}

// addConfigured is `--configured <ifname>`: the settings on stdin travel with the add request.
func addConfigured(name string) {
	checkName(name)
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("%s: reading the settings from stdin: %v", name, err)
	}
	if _, err := ask(configuredRequest(name, string(input)), true); err != nil {
		fail("%s: %v", name, err)
	}
}

// configuredRequest is the `add-configured` request for `name` with the UAPI `set` lines of `input`:
// one line each, blank lines dropped, ended by an empty line (UAPI has no end of its own).
func configuredRequest(name, input string) string {
	var settings strings.Builder
	for _, line := range strings.Split(input, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			settings.WriteString(line + "\n")
		}
	}
	return "add-configured " + name + "\n" + settings.String()
}

// checkName exits with an error unless `name` may name an interface (and its socket file).
func checkName(name string) {
	if !validInterfaceName(name) {
		fail("%q is not a valid interface name (1-15 of A-Z a-z 0-9 _ = + . -)", name)
	}
}

// validInterfaceName: what Linux takes as a link name ("." and ".." it refuses) that also names a file.
func validInterfaceName(name string) bool {
	return validName.MatchString(name) && name != "." && name != ".."
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peerops-wireguard: "+format+"\n", args...)
	os.Exit(1)
}

func libraryVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "golang.zx2c4.com/wireguard" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// errNoHost: nothing listens on the control socket, or the host went away before it answered (it was
// exiting idle as the request came): either way a new host is what the request needs.
var errNoHost = errors.New("no host")

// ask sends one request to this namespace's host and returns its reply; with start, it starts a host
// when none answers.
func ask(request string, start bool) (string, error) {
	reply, err := send(request)
	if !errors.Is(err, errNoHost) {
		return reply, err
	}
	if !start {
		return "", fmt.Errorf("%w runs in this network namespace", errNoHost)
	}
	if os.Getenv("PEEROPS_WIREGUARD_KEEPER") != "" {
		if err := awaitKeeper(); err != nil {
			return "", err
		}
		return send(request)
	}
	if err := startHost(); err != nil {
		return "", err
	}
	return send(request)
}

func send(request string) (string, error) {
	c, err := net.DialTimeout("unix", controlSocket, startTimeout)
	if err != nil {
		return "", errNoHost
	}
	defer c.Close()
	return exchange(c, request)
}

// exchange sends one request on a connection to the host and reads its reply: "ok\n" followed by any
// data, or "error <message>\n". A connection that breaks before the status line is errNoHost.
func exchange(c net.Conn, request string) (string, error) {
	c.SetDeadline(time.Now().Add(requestTimeout))
	if _, err := fmt.Fprintf(c, "%s\n", request); err != nil {
		return "", errNoHost
	}
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		return "", errNoHost
	}
	if msg, isErr := strings.CutPrefix(status, "error "); isErr {
		return "", errors.New(strings.TrimSpace(msg))
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		return "", fmt.Errorf("reading the host's reply: %w", err)
	}
	return string(rest), nil
}

// startHost launches `peerops-wireguard --host` detached and waits until its control socket answers.
func startHost() error {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(startLockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", startLockPath, err)
	}
	// Another command may have started the host while this one waited for the lock.
	if answers() {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, "--host")
	cmd.Stdout, cmd.Stderr = logFile, logFile // stdin: /dev/null
	// Its own session: no terminal hang-up or process-group signal meant for the caller reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the host: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if answers() {
			return nil
		}
		select {
		case err := <-exited:
			if err != nil || !answers() {
				return fmt.Errorf("the host exited at start (%v): see %s", err, logPath)
			}
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("the host did not answer within %s: see %s", startTimeout, logPath)
}

// awaitKeeper waits for the keeper's host (`--serve` in the keeper's container), which may start after
// the agent: a host started here would die with the agent's container, and its tunnels with it.
func awaitKeeper() error {
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if answers() {
			return nil
		}
	}
	return fmt.Errorf("no host answered within %s, and PEEROPS_WIREGUARD_KEEPER says the WireGuard keeper runs it: is the <release>-peerops-wireguard pod running on this node?", startTimeout)
}

func answers() bool {
	c, err := net.Dial("unix", controlSocket)
	if err == nil {
		c.Close()
	}
	return err == nil
}
