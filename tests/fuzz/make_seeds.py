#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/: a few valid and
near-valid inputs per target, in each harness's input format (see the
comment at the top of tests/fuzz/fuzz_<target>.cc). The files are committed;
run this again only when a harness's input format changes:

    python3 tests/fuzz/make_seeds.py
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x4C435448  # "HTCL"
VERSION = 2


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(bytes(data))


def u8(v): return struct.pack("<B", v & 0xFF)
def u16(v): return struct.pack("<H", v & 0xFFFF)
def u32(v): return struct.pack("<I", v & 0xFFFFFFFF)
def i32(v): return struct.pack("<i", v)
def u64(v): return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


# ---- unique_id: the 128-byte id (unique_id.cc's Wire) ----
def unique_id(magic=MAGIC, version=VERSION, family=2, port=29500, addr=bytes([127, 0, 0, 1]), job=0x0123456789ABCDEF):
    w = u32(magic) + u16(version) + u16(family) + u16(port) + u16(0)
    w += addr.ljust(16, b"\0") + u32(0) + u64(job) + bytes(range(32)) + bytes(56)
    assert len(w) == 128
    return w


def seeds_unique_id():
    write("unique_id", "valid_ipv4", unique_id())
    write("unique_id", "valid_ipv6", unique_id(family=10, addr=bytes(15) + b"\1"))
    write("unique_id", "bad_magic_nccl_like", unique_id(magic=0x00000002))
    write("unique_id", "other_version", unique_id(version=3))
    write("unique_id", "bad_family", unique_id(family=1))
    write("unique_id", "short", unique_id()[:40])


# ---- server_handshake: byte 0 bit 0 = protocol-aware client ----
# aware: ctl, [magic u32 unless ctl&1], [version u32 unless ctl&2],
# [jobId u64 unless ctl&4], rank i32, nranks i32, [service u32 unless ctl&8],
# reserved u32, cutAt u8, rawMac u64, bit u8, nonce[16], trailing
def server_hs(ctl, rank=1, nranks=4, extra_fields=b"", cut_at=0, raw_mac=0, bit=0, trailing=b""):
    return (u8(1) + u8(ctl) + extra_fields + i32(rank) + i32(nranks) + u32(0) + u8(cut_at) + u64(raw_mac) + u8(bit)
            + bytes(range(16)) + trailing)


def seeds_server_handshake():
    write("server_handshake", "valid", server_hs(0x0F))
    write("server_handshake", "valid_trailing_bytes", server_hs(0x0F, trailing=b"after the proof"))
    # ctl 0x0B: job id from the input (another job)
    d = u8(1) + u8(0x0B) + u64(0xDEAD) + i32(0) + i32(2) + u32(0) + u8(0) + u64(0) + u8(0) + bytes(16)
    write("server_handshake", "other_job", d)
    write("server_handshake", "mac_one_bit_off", server_hs(0x2F, bit=17))
    write("server_handshake", "reflected_role", server_hs(0x5F))
    write("server_handshake", "wrong_secret", server_hs(0x1F, bit=3))
    write("server_handshake", "proof_cut_short", server_hs(0x8F, cut_at=30))
    # raw: a well-formed proof with a MAC that cannot match a fresh nonce
    raw = u32(MAGIC) + u32(VERSION) + u64(0x1122334455667788) + i32(1) + i32(2) + u32(3) + u32(0) + bytes(16) + u64(0)
    write("server_handshake", "raw_replayed_proof", u8(0) + raw)
    write("server_handshake", "raw_bad_magic", u8(0) + u32(0x12345678) + raw[4:])


# ---- client_handshake: byte 0 bit 0 = protocol-aware server ----
# aware: ctl, [magic unless ctl&1], [version unless ctl&2], [service unless
# ctl&4], reserved u32, nonce[16], cutAt u8, rawMac u64, bit u8, trailing
def client_hs(ctl, fields=b"", cut_at=0, raw_mac=0, bit=0, trailing=b""):
    return u8(1) + u8(ctl) + fields + u32(0) + bytes(range(100, 116)) + u8(cut_at) + u64(raw_mac) + u8(bit) + trailing


def seeds_client_handshake():
    write("client_handshake", "valid", client_hs(0x07))
    write("client_handshake", "valid_trailing_bytes", client_hs(0x07, trailing=b"more"))
    write("client_handshake", "reflected_mac", client_hs(0x07 | (1 << 3) | 0x20))
    write("client_handshake", "wrong_secret", client_hs(0x07 | (1 << 3), bit=9))
    write("client_handshake", "mac_one_bit_off", client_hs(0x07 | (2 << 3), bit=63))
    write("client_handshake", "other_service", client_hs(0x03, fields=u32(1)))
    write("client_handshake", "other_version", client_hs(0x05, fields=u32(3)))
    write("client_handshake", "hello_cut_short", client_hs(0x47, cut_at=10))
    write("client_handshake", "no_proof", client_hs(0x87))
    raw = u32(MAGIC) + u32(VERSION) + u32(3) + u32(0) + bytes(16) + u64(0x42)
    write("client_handshake", "raw_replayed_server", u8(0) + raw)


# ---- root: byte 0 = connections - 1; per connection a mode byte ----
# mode bit 0: protocol-aware (else raw: u16 length + bytes); 2: right job;
# 4: root service; 8: raw 32-bit nranks and rank (else one byte each:
# nranks = b % 5, rank = b % 6 - 1); 0x10: u16 record length (else u8);
# 0x20: explicit u32 size field; 0x40: u8 + trailing bytes; 0x80: stop
# after the handshake.
def conn(nranks, rank, record, mode=0x07, len_field=None, extra=None):
    d = u8(mode | (0x20 if len_field is not None else 0) | (0x40 if extra is not None else 0))
    d += u8(nranks) + u8(rank + 1)
    d += u8(len(record)) + record
    if len_field is not None:
        d += u32(len_field)
    if extra is not None:
        d += u8(len(extra)) + extra
    return d


def seeds_root():
    rec = lambda r, n=16: bytes((r * 31 + i) & 0xFF for i in range(n))
    write("root", "two_ranks", u8(1) + conn(2, 0, rec(0)) + conn(2, 1, rec(1)))
    write("root", "four_ranks_any_order",
          u8(3) + conn(4, 2, rec(2)) + conn(4, 0, rec(0)) + conn(4, 3, rec(3)) + conn(4, 1, rec(1)))
    write("root", "one_rank", u8(0) + conn(1, 0, rec(0, 40)))
    write("root", "duplicate_rank", u8(2) + conn(2, 0, rec(0)) + conn(2, 0, rec(5)) + conn(2, 1, rec(1)))
    write("root", "nranks_disagree", u8(2) + conn(2, 0, rec(0)) + conn(3, 1, rec(1)) + conn(2, 1, rec(1)))
    write("root", "record_sizes_differ", u8(2) + conn(2, 0, rec(0)) + conn(2, 1, rec(1, 20)) + conn(2, 1, rec(1)))
    write("root", "rank_out_of_range_first", u8(2) + conn(3, 4, rec(0)) + conn(2, 0, rec(0)) + conn(2, 1, rec(1)))
    write("root", "size_field_zero", u8(1) + conn(2, 0, rec(0), len_field=0) + conn(2, 1, rec(1)))
    write("root", "size_field_huge", u8(1) + conn(2, 0, rec(0), len_field=0x10001) + conn(2, 1, rec(1)))
    write("root", "size_field_past_record", u8(1) + conn(2, 0, rec(0), len_field=20, extra=b"abcd") + conn(2, 1, rec(1, 20)))
    write("root", "wrong_job_and_service", u8(2) + conn(2, 0, rec(0), mode=0x05)[:1] + u64(7) + conn(2, 0, rec(0))[1:]
          + conn(2, 0, rec(0), mode=0x03)[:1] + u32(2) + conn(2, 0, rec(0))[1:] + conn(2, 1, rec(1)))
    write("root", "raw_client", u8(1) + u8(0) + u16(56) + u32(MAGIC) + u32(VERSION) + bytes(48) + conn(1, 0, rec(0)))
    write("root", "handshake_only", u8(0) + u8(0x87) + u8(2) + u8(1))


# ---- peer_info: byte 0 = records - 1, byte 1 = size change of the last ----
def peer(rank, group=b"a", kind=b"host", host=b"node0", host_hash=0x5555, terminate=True, site=b""):
    d = i32(rank) + i32(1000 + rank) + u64(host_hash)
    d += host.ljust(64, b"\0") + kind.ljust(16, b"\0") + group.ljust(32, b"\0") + i32(-1) + u32(0)
    d += site.ljust(32, b"\0") + u64(0)  # site, group map hash
    if not terminate:
        d = d[:16] + b"x" * 64 + d[80:]
    assert len(d) == 176
    return d


def seeds_peer_info():
    write("peer_info", "four_ranks_aabb", u8(3) + u8(0) + b"".join(peer(r, b"ab"[r // 2:r // 2 + 1]) for r in range(4)))
    write("peer_info", "two_hosts", u8(1) + u8(0) + peer(0) + peer(1, host=b"node1", host_hash=0x6666))
    write("peer_info", "gpu_groups", u8(2) + u8(0) + peer(0, b"nv", b"cuda") + peer(1, b"amd", b"hip") + peer(2, b"cpu"))
    write("peer_info", "group_mixes_kinds", u8(1) + u8(0) + peer(0, b"a", b"cuda") + peer(1, b"a", b"hip"))
    write("peer_info", "wrong_rank", u8(1) + u8(0) + peer(0) + peer(5))
    write("peer_info", "hostname_not_terminated", u8(0) + u8(0) + peer(0, terminate=False))
    write("peer_info", "short_record", u8(1) + u8(0xF3) + peer(0) + peer(1))
    write("peer_info", "seventeen_groups", u8(16) + u8(0) + b"".join(peer(r, b"g%d" % r) for r in range(17)))
    write("peer_info", "two_sites", u8(1) + u8(0) + peer(0, site=b"onprem") + peer(1, b"b", site=b"cloud"))
    write("peer_info", "site_not_terminated", u8(0) + u8(0) + peer(0, site=b"s" * 32))
    write("peer_info", "sixteen_groups", u8(15) + u8(0) + b"".join(peer(r, b"g%d" % r) for r in range(16)))


# ---- tcp_recv ----
# flags (1 structured, 2 two peers, 4 pieces), nx-1, per transfer: k (k%3:
# 0 send 1 recv 2 recv-reduce; bit 2: peer 2), dtype, op, elements u16, seq,
# coll-1, count u16, root (i8); 8 piece sizes if flags&4; structured: per
# receive m (0xf0|field: change it; 0xf7: cut), delta, payload bytes
# (missing ones are a pattern), [u16 cut position]; trailing count + bytes.
def xfer(k, dtype, op, elems, seq=1, coll=0, count=None, root=0xFF):
    return u8(k) + u8(dtype) + u8(op) + u16(elems) + u8(seq) + u8(coll) + u16(elems if count is None else count) + u8(root)


def seeds_tcp_recv():
    plain = lambda n: bytes((i * 37 + 11) & 0xFF for i in range(n))
    # recv of 100 floats, recv-reduce of 64 floats (sum), send of 10 int8
    d = u8(1) + u8(2) + xfer(1, 7, 0, 100) + xfer(2, 7, 0, 64) + xfer(0, 0, 0, 10)
    d += u8(0) + u8(0) + plain(400) + u8(0) + u8(0) + plain(256) + u8(0)
    write("tcp_recv", "recv_reduce_send", d)
    # two peers, pieces: half max-reduce (split elements), bf16 sum, fp8 recv
    d = u8(7) + u8(3) + xfer(2, 6, 2, 33) + xfer(6, 9, 0, 17) + xfer(1, 10, 0, 9) + xfer(4, 8, 0, 3)
    d += bytes([1, 3, 5, 2, 7, 1, 30, 11])
    d += u8(0) + u8(0) + plain(66) + u8(0) + u8(0) + plain(9) + u8(0) + u8(0) + plain(24) + u8(3) + b"xyz"
    write("tcp_recv", "two_peers_in_pieces", d)
    d = u8(1) + u8(0) + xfer(1, 2, 0, 4) + u8(0xF0) + u8(1) + plain(16) + u8(0)
    write("tcp_recv", "seq_mismatch", d)
    d = u8(1) + u8(0) + xfer(1, 2, 0, 4) + u8(0xF2) + u8(4) + plain(16) + u8(0)
    write("tcp_recv", "size_mismatch", d)
    d = u8(1) + u8(0) + xfer(2, 4, 1, 8) + u8(0xF7) + u8(0) + plain(64) + u16(40) + u8(0)
    write("tcp_recv", "stream_cut", d)
    d = u8(1) + u8(1) + xfer(1, 0, 0, 0) + xfer(2, 3, 3, 0) + u8(0) + u8(0) + u8(0) + u8(0) + u8(0)
    write("tcp_recv", "empty_messages", d)
    # raw: the stream is a header and 8 payload bytes for one recv of 8 int8
    hdr = u64(1) + u64(8) + u64(8) + u16(1) + u8(0) + u8(0) + i32(-1)
    write("tcp_recv", "raw_stream", u8(0) + u8(0) + xfer(1, 0, 0, 8) + hdr + plain(8))


# ---- record ----
# mode (bit 0 raw, bits 1-2 rekey-1, bit 3 via plain(), bits 4-5 records read
# ahead - 1), records (n-1, then
# u16 length and a seed each), alteration (kind, u16 pos, u16 len, xor), pieces.
def seeds_record():
    recs = lambda *ls: u8(len(ls) - 1) + b"".join(u16(l - 1) + u8(i * 7) for i, l in enumerate(ls))
    write("record", "intact_three", u8(0) + recs(100, 1024, 5) + u8(0) + u16(0) + u16(0) + u8(0) + bytes([200] * 8))
    write("record", "flip_second", u8(2) + recs(50, 60, 70) + u8(1) + u16(90) + u16(0) + u8(4) + bytes([13] * 8))
    write("record", "replay_first", u8(8) + recs(40, 40) + u8(3) + u16(0) + u16(59) + u8(0) + bytes([255] * 4))
    write("record", "cut_short", u8(6) + recs(300, 300) + u8(4) + u16(400) + u16(0) + u8(0) + bytes([9] * 8))
    write("record", "raw", u8(1) + u32(40) + bytes(range(60)))
    write("record", "ahead_four_flip_third", u8(0x32) + recs(30, 700, 20, 900) + u8(1) + u16(800) + u16(0) + u8(2)
          + bytes([255] * 8))
    write("record", "ahead_two_intact", u8(0x10) + recs(1, 2, 3, 1024, 5) + u8(0) + u16(0) + u16(0) + u8(0)
          + bytes([250] * 12))
    # Records of 50, 60 and 768 bytes; a cut of 271 wire bytes from the first
    # record's last tag byte, where the byte brought there equals it: the
    # first record stays whole and authenticates (the oracle must compare the
    # streams, not assume the change at the cut).
    write("record", "cut_leaves_first_whole", bytes.fromhex(
        "02 02 3100 00 3b00 ff ff02 d0 07 4500 0e01 0d 0d0d0d0d0d0d"))


# ---- message ----
# mode (bits 0-1 messages per key - 1, bit 2 raw, bit 3 in place, bits 4-5
# threads - 1), u16 message, u8 part, u16 length/16, seed, alteration (kind:
# 0 none, 1 flip, 2 other message, 3 other part, 4 other length, 5 other
# key; u32 position, xor).
def seeds_message():
    alt = lambda kind, pos=0, x=1: u8(kind) + u32(pos) + u8(x)
    write("message", "intact_one_record", u8(0) + u16(3) + u8(1) + u16(40) + u8(5) + alt(0))
    write("message", "intact_four_records_three_threads", u8(0x21) + u16(9) + u8(2) + u16(60000) + u8(7) + alt(0))
    write("message", "flip_in_place", u8(0x1A) + u16(1) + u8(0) + u16(20000) + u8(1) + alt(1, 300000, 4))
    write("message", "other_message", u8(1) + u16(4) + u8(1) + u16(10) + u8(2) + alt(2, 0, 3))
    write("message", "other_part", u8(0) + u16(4) + u8(1) + u16(10) + u8(2) + alt(3, 0, 1))
    write("message", "shorter_on_a_record_boundary", u8(0) + u16(0) + u8(1) + u16(16384) + u8(2) + alt(4, 0, 1))
    write("message", "other_key", u8(0) + u16(0) + u8(0) + u16(1) + u8(2) + alt(5))
    write("message", "raw", u8(4) + u16(0) + u8(0) + u16(2) + u8(0) + bytes(range(80)))


# ---- shm_slots ----
# nx-1, per transfer: reduce flag, dtype, op, elements u16, seq, coll-1,
# count u16; slots (0..4); per slot a mode byte: mode&3 == 0 raw (64-byte
# header, u16 data length, data), else the sender's next piece (2: single
# copy when possible) with field mode>>4 changed by 1 + delta.
def shm_xfer(reduce, dtype, op, elems, seq=1, coll=0):
    return u8(reduce) + u8(dtype) + u8(op) + u16(elems) + u8(seq) + u8(coll) + u16(elems)


def seeds_shm_slots():
    # (at most 2048 elements per message: 4-byte and wider types span slots of 4096 bytes)
    write("shm_slots", "recv_two_slots", u8(0) + shm_xfer(0, 2, 0, 1250) + u8(2) + u8(1) + u8(0) + u8(1) + u8(0))
    write("shm_slots", "single_copy", u8(0) + shm_xfer(0, 4, 0, 750) + u8(1) + u8(2) + u8(0))
    write("shm_slots", "reduce_float_two_slots", u8(0) + shm_xfer(1, 7, 0, 1500) + u8(2) + u8(1) + u8(0) + u8(1) + u8(0))
    write("shm_slots", "three_messages", u8(2) + shm_xfer(0, 2, 0, 10) + shm_xfer(1, 6, 2, 0) + shm_xfer(1, 11, 1, 300)
          + u8(3) + u8(1) + u8(0) + u8(1) + u8(0) + u8(1) + u8(0))
    write("shm_slots", "offset_off", u8(0) + shm_xfer(0, 0, 0, 100) + u8(1) + u8(0x51) + u8(3))
    write("shm_slots", "length_past_slot", u8(0) + shm_xfer(0, 2, 0, 1250) + u8(1) + u8(0x91) + u8(1))
    write("shm_slots", "reduce_splits_element", u8(0) + shm_xfer(1, 8, 0, 600) + u8(2) + u8(0x81) + u8(3) + u8(1) + u8(0))
    write("shm_slots", "tag_mismatch", u8(0) + shm_xfer(0, 0, 0, 100) + u8(1) + u8(0x11) + u8(1))
    write("shm_slots", "missing_slot", u8(0) + shm_xfer(0, 2, 0, 1250) + u8(1) + u8(1) + u8(0))
    hdr = u64(1) + u64(16) + u64(16) + u16(1) + u8(0) + u8(0) + i32(-1) + u64(0) + u64(16) + u64(0) + u32(0) + u32(0)
    write("shm_slots", "raw_slot", u8(0) + shm_xfer(0, 0, 0, 16) + u8(1) + u8(0) + hdr + u16(16) + bytes(range(16)))


if __name__ == "__main__":
    shutil.rmtree(os.path.join(HERE, "corpus"), ignore_errors=True)
    for f in (seeds_unique_id, seeds_server_handshake, seeds_client_handshake, seeds_root, seeds_peer_info, seeds_record,
              seeds_tcp_recv, seeds_shm_slots, seeds_message):
        f()
