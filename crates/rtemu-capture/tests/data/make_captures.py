#!/usr/bin/env python3
"""Writes the golden capture files that tests/capture.rs (the reader) and rtemu-sim's tests
(its pcap writer and traffic generator) read.

Run from this directory: `python3 make_captures.py`. The files are written byte by byte from the
format specifications (pcap-savefile(5), draft-ietf-opsawg-pcapng), independently of the Rust
reader. Frame i's bytes are `(i * 7 + k) % 256` for k in 0..caplen; tests/capture.rs rebuilds
them the same way and compares every field.

Cross-checked by hand with tshark 4.0.17 (Debian bookworm), which reads the same timestamps,
lengths and interfaces: `tshark -r small-le.pcapng -T fields -e frame.time_epoch -e frame.len
-e frame.cap_len -e frame.interface_id`. The tests do not need tshark.
"""
import struct


def frame(i, caplen):
    return bytes((i * 7 + k) % 256 for k in range(caplen))


def pcap(path, order, nanos):
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    # (seconds, sub-second units, caplen, orig_len)
    records = [(1, 500, 60, 60), (2, 0, 1514, 1514), (2, 999, 100, 1500)]
    for i, (secs, frac, caplen, orig) in enumerate(records):
        out += struct.pack(order + "IIII", secs, frac, caplen, orig) + frame(i, caplen)
    open(path, "wb").write(out)


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def block(order, kind, body):
    body = pad4(body)
    length = 12 + len(body)
    return struct.pack(order + "II", kind, length) + body + struct.pack(order + "I", length)


def option(order, code, value):
    return struct.pack(order + "HH", code, len(value)) + pad4(value)


def pcapng(path, order):
    end = option(order, 0, b"")
    shb = block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
                + option(order, 4, b"make_captures.py") + end)
    # Interface 0: Ethernet, snap length 0 (none), default microsecond timestamps.
    idb0 = block(order, 1, struct.pack(order + "HHI", 1, 0, 0) + option(order, 2, b"eth0") + end)
    # Interface 1: Ethernet, nanosecond timestamps (if_tsresol 9), snap length 128.
    idb1 = block(order, 1, struct.pack(order + "HHI", 1, 0, 128) + option(order, 9, b"\x09") + end)
    # Interface 2: Ethernet, 2^-10 s units, offset 100 s (if_tsoffset).
    idb2 = block(order, 1, struct.pack(order + "HHI", 1, 0, 0) + option(order, 9, b"\x8a")
                 + option(order, 14, struct.pack(order + "q", 100)) + end)
    nrb = block(order, 4, struct.pack(order + "HH", 1, 9) + pad4(b"\x0a\x00\x00\x01host\0") + end)
    custom = block(order, 0x40000BAD, b"\x01\x02\x03\x04unknown block body")

    def epb(iface, units, data, orig, opts=b""):
        return block(order, 6, struct.pack(order + "IIIII", iface, units >> 32, units & 0xFFFFFFFF,
                                           len(data), orig) + pad4(data) + opts)

    out = shb + idb0 + nrb + idb1 + idb2
    # Frame 0: interface 0, 1.000500 s in microseconds.
    out += epb(0, 1_000_500, frame(0, 60), 60, option(order, 1, b"a comment") + end)
    out += custom
    # Frame 1: interface 1, 2.000000123 s in nanoseconds, 61 bytes (padded).
    out += epb(1, 2_000_000_123, frame(1, 61), 61)
    # Frame 2: interface 2, 3 s + 512/1024 s in 2^-10 s units, plus 100 s offset.
    out += epb(2, 3 * 1024 + 512, frame(2, 100), 1500)
    # Frame 3: simple packet block on interface 0 (no timestamp: inherits 103.5 s), 42 bytes.
    out += block(order, 3, struct.pack(order + "I", 42) + frame(3, 42))
    # Frame 4: obsolete packet block, interface 1, drops 0, 4 s in nanoseconds.
    out += block(order, 2, struct.pack(order + "HHIIII", 1, 0, 0, 4_000_000_000, 64, 64) + frame(4, 64))
    open(path, "wb").write(out)


def written(path):
    """What rtemu-sim's PcapWriter must write for the frames in its tests/pcap_writer.rs's `written_frames`."""
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)
    for i, (ts_ns, caplen, orig) in enumerate([(0, 42, 42), (1_500_000_001, 60, 1514), (4_294_967_295_999_999_999, 1, 0)]):
        out += struct.pack("<IIII", ts_ns // 10**9, ts_ns % 10**9, caplen, max(orig, caplen)) + frame(i, caplen)
    open(path, "wb").write(out)


def corpus():
    """Odd inputs for the mutation test to start from, in corpus/."""
    import os
    os.makedirs("corpus", exist_ok=True)
    o = "<"
    end = option(o, 0, b"")
    shb = block(o, 0x0A0D0D0A, struct.pack(o + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = block(o, 1, struct.pack(o + "HHI", 1, 0, 0))
    files = {
        # A pcap record claiming 4 GiB.
        "huge-caplen.pcap": struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
        + struct.pack("<IIII", 0, 0, 0xFFFFFFFF, 0xFFFFFFFF) + b"x" * 16,
        # An enhanced packet block whose captured length runs past its block.
        "epb-overrun.pcapng": shb + idb + block(o, 6, struct.pack(o + "IIIII", 0, 0, 0, 200, 200) + b"y" * 8),
        # An interface with if_tsresol 2^-127 and one with 10^-30.
        "bad-tsresol.pcapng": shb + block(o, 1, struct.pack(o + "HHI", 1, 0, 0) + option(o, 9, b"\xff") + end),
        # Two interfaces with different link types.
        "mixed-links.pcapng": shb + idb + block(o, 1, struct.pack(o + "HHI", 105, 0, 0)),
        # An option whose length runs past the block.
        "option-overrun.pcapng": shb + block(o, 1, struct.pack(o + "HHI", 1, 0, 0) + struct.pack(o + "HH", 9, 200)),
        # A timestamp in microseconds beyond 2554.
        "late-timestamp.pcapng": shb + idb
        + block(o, 6, struct.pack(o + "IIIII", 0, 0xFFFFFFFF, 0xFFFFFFFF, 4, 4) + b"zzzz"),
    }
    for name, body in files.items():
        open(os.path.join("corpus", name), "wb").write(body)


def checksum(data):
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_frame(seq, size):
    """A traffic-generator frame as src/traffic.rs documents it."""
    payload = bytearray(size - 42)
    if len(payload) >= 8:
        payload[:8] = struct.pack("!Q", seq)
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    udp_len = size - 34
    pseudo = src + dst + struct.pack("!BBH", 0, 17, udp_len)
    udp = struct.pack("!HHHH", 49152, 9, udp_len, 0) + payload
    udp_sum = checksum(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", udp_sum) + udp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, size - 14, seq & 0xFFFF, 0x4000, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]) + ip + udp


def traffic(path):
    """What `cbr 1000pps 42B,49B,50B,64B:2,1500B 10ms` must write: 10 frames 1 ms apart."""
    sizes = [42, 49, 50, 64, 64, 1500]
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)
    for seq in range(10):
        data = udp_frame(seq, sizes[seq % len(sizes)])
        ts = seq * 1_000_000
        out += struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), len(data)) + data
    open(path, "wb").write(out)


traffic("traffic-cbr.pcap")
corpus()
written("written-ns.pcap")
pcap("small-le-us.pcap", "<", False)
pcap("small-be-ns.pcap", ">", True)
pcapng("small-le.pcapng", "<")
pcapng("small-be.pcapng", ">")
