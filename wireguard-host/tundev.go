package main

// A TUN device for the library's device.NewDevice, one packet per read and write, whose link events come
// from one netlink listener for the whole host. The library's own Linux TUN (tun.CreateTUN) starts a
// netlink listener per tunnel, each on a thread of its own: every link or address change in the
// namespace then woke every tunnel's listener, and a first pass creating N tunnels cost O(N²) wake-ups
// (172 ms of host CPU a tunnel at 1,000 tunnels in bench:agent). It also enables segmentation offload,
// whose batches are what a DN42 tunnel (BGP and modest traffic) needs least; the UDP side keeps the
// library's batching.

import (
	"errors"
	"log"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"
)

type tunDevice struct {
	file   *os.File
	name   string
	index  int32
	events chan tun.Event
	links  *linkWatcher
	// last state told to the device: the library wants each change once
	up        bool
	mtu       uint32
	closeOnce sync.Once
}

func createTUN(name string, links *linkWatcher) (*tunDevice, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	if err == nil {
		err = unix.SetNonblock(fd, true) // so that Go's poller, not a thread, waits for packets
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	file := os.NewFile(uintptr(fd), "/dev/net/tun")
	t := &tunDevice{file: file, name: name, events: make(chan tun.Event, 16), links: links}
	iface, err := netInterface(name)
	if err == nil {
		t.index = iface
		// wireguard-go's default, so that a tunnel looks the same whichever program made it
		err = setMTU(name, device.DefaultMTU)
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	t.mtu = device.DefaultMTU
	links.add(t)
	return t, nil
}

func (t *tunDevice) File() *os.File           { return t.file }
func (t *tunDevice) Name() (string, error)    { return t.name, nil }
func (t *tunDevice) Events() <-chan tun.Event { return t.events }
func (t *tunDevice) BatchSize() int           { return 1 }
func (t *tunDevice) MTU() (int, error)        { return getMTU(t.name) }
func (t *tunDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, err := t.file.Read(bufs[0][offset:])
	if err != nil {
		return 0, err // a deleted link: EBADFD, and the device closes
	}
	sizes[0] = n
	return 1, nil
}

func (t *tunDevice) Write(bufs [][]byte, offset int) (int, error) {
	for i, buf := range bufs {
		if _, err := t.file.Write(buf[offset:]); err != nil {
			if errors.Is(err, syscall.EBADFD) {
				return i, os.ErrClosed
			}
			return i, err
		}
	}
	return len(bufs), nil
}

// Close closes the file (which deletes the link) and the event channel, as tun.Device requires.
func (t *tunDevice) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.links.remove(t)
		err = t.file.Close()
	})
	return err
}

// linkWatcher is the host's one netlink listener: it tells each tunnel when its link goes up or down or
// its MTU changes, as the library's per-tunnel listener did.
type linkWatcher struct {
	mu      sync.Mutex
	byIndex map[int32]*tunDevice
}

func watchLinks() (*linkWatcher, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	// link changes only: address and route changes (most of a tunnel's set-up) do not concern a device
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	w := &linkWatcher{byIndex: map[int32]*tunDevice{}}
	go w.run(fd)
	return w, nil
}

func (w *linkWatcher) add(t *tunDevice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byIndex[t.index] = t
}

// remove forgets the tunnel and closes its event channel; under the lock, so no event is sent after.
func (w *linkWatcher) remove(t *tunDevice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byIndex[t.index] == t {
		delete(w.byIndex, t.index)
	}
	close(t.events)
}

func (w *linkWatcher) run(fd int) {
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR || err == unix.ENOBUFS {
				continue // ENOBUFS: events were lost; the next change of a link tells its state again
			}
			log.Printf("link events stopped: %v", err)
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for i := range msgs {
			if msgs[i].Header.Type == unix.RTM_NEWLINK && len(msgs[i].Data) >= unix.SizeofIfInfomsg {
				w.linkChanged(&msgs[i])
			}
		}
	}
}

func (w *linkWatcher) linkChanged(m *syscall.NetlinkMessage) {
	info := (*unix.IfInfomsg)(unsafe.Pointer(&m.Data[0]))
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.byIndex[info.Index]
	if t == nil {
		return
	}
	// IFF_RUNNING: up with a carrier, which a TUN has while its file is open
	if up := info.Flags&unix.IFF_RUNNING != 0; up != t.up {
		t.up = up
		t.send(map[bool]tun.Event{true: tun.EventUp, false: tun.EventDown}[up])
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.IFLA_MTU && len(a.Value) >= 4 {
			if mtu := *(*uint32)(unsafe.Pointer(&a.Value[0])); mtu != t.mtu {
				t.mtu = mtu
				t.send(tun.EventMTUUpdate)
			}
		}
	}
}

// send never blocks the host's one listener: a device that stopped reading its events is closing.
func (t *tunDevice) send(e tun.Event) {
	select {
	case t.events <- e:
	default:
	}
}

// interfaceIoctl runs one SIOC[GS]IF* request on the interface `name`; `value` is written before a set,
// and the answer's value returned after a get.
func interfaceIoctl(name string, request uint, value uint32) (uint32, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	ifr.SetUint32(value)
	if err := unix.IoctlIfreq(fd, request, ifr); err != nil {
		return 0, err
	}
	return ifr.Uint32(), nil
}

func netInterface(name string) (int32, error) {
	index, err := interfaceIoctl(name, unix.SIOCGIFINDEX, 0)
	return int32(index), err
}

func getMTU(name string) (int, error) {
	mtu, err := interfaceIoctl(name, unix.SIOCGIFMTU, 0)
	return int(mtu), err
}

func setMTU(name string, mtu int) error {
	_, err := interfaceIoctl(name, unix.SIOCSIFMTU, uint32(mtu))
	return err
}
