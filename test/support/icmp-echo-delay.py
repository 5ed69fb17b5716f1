#!/usr/bin/env python3
"""Answers IPv4 pings after a delay chosen by the sender's address: distance between network namespaces
where the kernel has no netem qdisc (test/agent/nearest-router.test.ts). The namespace's own echo replies
must be off (net.ipv4.icmp_echo_ignore_all=1).

usage: icmp-echo-delay.py SOURCE=MS [SOURCE=MS ...]
"""
import socket
import struct
import sys
import threading

delays = {}
for arg in sys.argv[1:]:
    source, ms = arg.split("=")
    delays[source] = int(ms) / 1000.0


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
print("ready", flush=True)
while True:
    packet, (source, _) = sock.recvfrom(65535)
    header = (packet[0] & 0x0F) * 4
    icmp = packet[header:]
    if len(icmp) < 8 or icmp[0] != 8:
        continue  # only echo requests
    reply = b"\0\0\0\0" + icmp[4:]
    reply = reply[:2] + struct.pack("!H", checksum(reply)) + reply[4:]
    threading.Timer(delays.get(source, 0), sock.sendto, (reply, (source, 0))).start()
