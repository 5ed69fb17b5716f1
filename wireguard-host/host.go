package main

// The host: one process carrying every tunnel of its network namespace. Each tunnel is what a
// wireguard-go daemon would be (a TUN, tundev.go; a device from the wireguard-go library; a UAPI socket served by
// device.IpcHandle), so `wg`, `ip link del` and the agent see no difference.
//
// Lifecycle, as an operator would expect of the daemons it replaces:
//   - a tunnel ends when its link is deleted (`ip link del`: the TUN read fails and the device closes);
//     the host then forgets it and removes its socket;
//   - with no tunnel left for idleExit, the host exits (the next `peerops-wireguard <ifname>` starts one),
//     unless it runs for a supervisor (`--serve`);
//   - SIGTERM or SIGINT closes every tunnel and exits, as stopping every wireguard-go daemon would. Nothing
//     in peerops sends it: the host runs in its own session, so stopping or restarting the agent (the
//     unit's KillMode=process) leaves it and its tunnels up; an operator stops it to take them all down;
//   - a crash takes every tunnel down at once; the agent's next pass finds the links gone and re-creates them.

import (
	"bufio"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
)

// Long enough that removing and re-creating a tunnel (a session restart) keeps the same host.
const idleExit = 60 * time.Second

type tunnel struct {
	dev  *device.Device
	uapi *net.UnixListener
	// the private key (hex) last given (add) or dumped, and its public key (base64): tunnel.publicKey
	derived atomic.Pointer[[2]string]
}

type host struct {
	mu       sync.Mutex
	tunnels  map[string]*tunnel
	idle     *time.Timer
	links    *linkWatcher
	logLevel int
	// `--serve`: a supervisor runs the host; it stays without tunnels
	stay bool
}

// runHost serves this namespace's tunnels until a signal (or, unless `stay`, until idle).
func runHost(stay bool) int {
	// Sockets and the log are root's alone (wg(8) connects as root), as wireguard-go makes them.
	syscall.Umask(0o077)
	log.SetOutput(hostLog)
	log.SetFlags(log.Ldate | log.Ltime)
	log.SetPrefix(fmt.Sprintf("peerops-wireguard[%d]: ", os.Getpid()))
	ln, err := net.Listen("unix", controlSocket)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			if stay {
				log.Printf("another host already serves this network namespace")
				return 1
			}
			return 0 // another host of this namespace won the race: it serves the request
		}
		log.Printf("control socket: %v", err)
		return 1
	}
	links, err := watchLinks()
	if err != nil {
		log.Printf("link events: %v", err)
		return 1
	}
	h := &host{tunnels: map[string]*tunnel{}, links: links, logLevel: logLevel(), stay: stay}
	go collectGarbage()
	h.idle = time.AfterFunc(idleExit, h.exitIfIdle)
	log.Printf("started (wireguard-go library %s)", libraryVersion())

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP)
	go func() {
		sig := <-signals
		h.mu.Lock()
		log.Printf("%v: closing %d tunnels and exiting", sig, len(h.tunnels))
		// at once: closing one device waits for its routines (tens of ms), which adds up over 1,000
		var wg sync.WaitGroup
		for _, t := range h.tunnels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.close()
			}()
		}
		wg.Wait()
		os.Exit(0)
	}()

	for {
		c, err := ln.Accept()
		if err != nil {
			log.Printf("control socket: %v", err)
			return 1
		}
		go h.serve(c.(*net.UnixConn))
	}
}

// collectGarbage runs the collector and returns free memory to the system every few seconds. For its
// batches of up to 128 packets the library reserves about 19 MiB of heap a tunnel that is mostly never
// touched (64 KiB buffers per direction and socket, the TUN's offload tables). Go starts a collection
// when the heap has grown by as much as is live, so with hundreds of tunnels the garbage of `wg show`
// and handshakes grew by gigabytes first, and its pages stayed with the process (6.8 GiB at 1,000
// tunnels in bench:agent).
func collectGarbage() {
	for range time.Tick(10 * time.Second) {
		debug.FreeOSMemory()
	}
}

// logger is device.NewLogger's, writing to the capped log.
func (h *host) logger(name string) *device.Logger {
	logf := func(level string) func(string, ...any) {
		return log.New(hostLog, fmt.Sprintf("%s: (%s) ", level, name), log.Ldate|log.Ltime).Printf
	}
	l := &device.Logger{Verbosef: device.DiscardLogf, Errorf: device.DiscardLogf}
	if h.logLevel >= device.LogLevelVerbose {
		l.Verbosef = logf("DEBUG")
	}
	if h.logLevel >= device.LogLevelError {
		l.Errorf = logf("ERROR")
	}
	return l
}

// The log (the host's stdout, a file in /var/run: memory) is emptied when it passes maxLog: a peer that
// never answers logs a failed handshake every few seconds for as long as the host runs.
const maxLog = 4 << 20

type cappedLog struct {
	mu sync.Mutex
	f  *os.File
}

var hostLog = &cappedLog{f: os.Stdout}

func (c *cappedLog) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, err := c.f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > maxLog {
		c.f.Truncate(0) // the file is opened for appending: the next write goes to its start
		fmt.Fprintf(c.f, "(log emptied at %d MiB)\n", maxLog>>20)
	}
	return c.f.Write(p)
}

// logLevel reads LOG_LEVEL as wireguard-go does; errors only unless asked.
func logLevel() int {
	switch os.Getenv("LOG_LEVEL") {
	case "verbose", "debug":
		return device.LogLevelVerbose
	case "silent":
		return device.LogLevelSilent
	}
	return device.LogLevelError
}

func (h *host) serve(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(requestTimeout))
	// An abstract socket has no file mode to guard it: only root (or the host's own user) may ask.
	if uid, err := peerUID(c); err != nil || (uid != 0 && uid != uint32(os.Geteuid())) {
		fmt.Fprintf(c, "error permission denied: only root may add tunnels\n")
		return
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return // a probe (answers()) connects and closes
	}
	cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch {
	case (cmd == "add" || cmd == "add-configured") && validInterfaceName(arg):
		var settings string
		if cmd == "add-configured" {
			if settings, err = readSettings(r); err != nil {
				fmt.Fprintf(c, "error reading the settings: %v\n", err)
				return
			}
		}
		if err := h.add(arg, settings); err != nil {
			fmt.Fprintf(c, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		fmt.Fprintf(c, "ok\n")
	case cmd == "list":
		fmt.Fprintf(c, "ok\n%s", h.list())
	case cmd == "dump":
		fmt.Fprintf(c, "ok\n%s", h.dump())
	default:
		fmt.Fprintf(c, "error unknown request %q\n", line)
	}
}

func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

func (h *host) list() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.tunnels))
	for name := range h.tunnels {
		names = append(names, name+"\n")
	}
	sort.Strings(names)
	return strings.Join(names, "")
}

// readSettings reads UAPI `set` lines up to an empty line (the request's end).
func readSettings(r *bufio.Reader) (string, error) {
	var settings strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(line) == "" {
			return settings.String(), nil
		}
		settings.WriteString(line)
	}
}

// add creates the tunnel <name>, with `settings` (UAPI `set` lines: keys, port, peers) applied before it
// answers when given. One at a time: creation is quick next to the agent's own steps, and the lock keeps
// two requests for one name from racing.
func (h *host) add(name, settings string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tunnels[name]; ok {
		return errors.New("this host already carries that interface")
	}
	// an ioctl, not net.InterfaceByName: that one reads every link of the namespace, which made adding
	// the 1,000th tunnel cost 57 % of the host's CPU in bench:agent
	if _, err := netInterface(name); err == nil {
		return errors.New("a link with that name already exists")
	}
	uapi, err := listenUAPI(name)
	if err != nil {
		return fmt.Errorf("UAPI socket: %w", err)
	}
	tdev, err := createTUN(name, h.links)
	if err != nil {
		uapi.Close()
		return fmt.Errorf("creating the TUN device: %w", err)
	}
	dev := device.NewDevice(tdev, conn.NewDefaultBind(), h.logger(name))
	t := &tunnel{dev: dev, uapi: uapi}
	if settings != "" {
		if err := dev.IpcSet(settings); err != nil {
			t.close() // the link goes with it
			return fmt.Errorf("applying the settings: %w", err)
		}
		// derived now, in the pass that makes the tunnel, rather than by the first dump after it
		for _, line := range strings.Split(settings, "\n") {
			if private, ok := strings.CutPrefix(line, "private_key="); ok {
				t.publicKey(private)
			}
		}
	}
	h.tunnels[name] = t
	h.idle.Stop()
	go h.run(name, t)
	return nil
}

// run serves a tunnel's UAPI socket until the device closes (its link was deleted), then forgets the
// tunnel.
func (h *host) run(name string, t *tunnel) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			c, err := t.uapi.Accept()
			if err != nil {
				return
			}
			go t.dev.IpcHandle(c)
		}
	}()
	select {
	case <-t.dev.Wait():
	case <-stopped:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tunnels[name] == t {
		t.close()
		delete(h.tunnels, name)
	}
	if len(h.tunnels) == 0 {
		h.idle.Reset(idleExit)
	}
}

// close stops the tunnel: closing the device closes its TUN, which deletes the link; closing the
// listener removes its socket file.
func (t *tunnel) close() {
	t.uapi.Close()
	t.dev.Close()
}

func (h *host) exitIfIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.tunnels) == 0 && !h.stay {
		log.Printf("no tunnel for %s: exiting", idleExit)
		os.Exit(0)
	}
}

func sockPath(name string) string { return fmt.Sprintf("%s/%s.sock", runDir, name) }

// listenUAPI binds <name>.sock, replacing a stale socket a killed daemon left, as wireguard-go does.
// Unlike the library's ipc.UAPIListen it does not watch the socket file with an inotify instance of its
// own: Linux allows a user 128 of those by default, which one host would spend at 128 tunnels. A tunnel
// ends when its link is deleted (how ip(8), wg-quick on Linux and the agent remove one).
func listenUAPI(name string) (*net.UnixListener, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}
	addr := &net.UnixAddr{Name: sockPath(name), Net: "unix"}
	ln, err := net.ListenUnix("unix", addr)
	if err == nil {
		return ln, nil // removes its file when closed
	}
	if c, dialErr := net.Dial("unix", addr.Name); dialErr == nil {
		c.Close()
		return nil, errors.New(addr.Name + " is in use")
	}
	if err := os.Remove(addr.Name); err != nil {
		return nil, err
	}
	return net.ListenUnix("unix", addr)
}
