"""What the wire carries: tcpdump on the loopback during a 4-rank job over
tcp (wire_job: an AllGather of text that names a random marker, group names
made of another). With HETCCL_ENCRYPT=all and a job secret, neither the
payload's marker nor the group names (carried by the bootstrap's peer
records) may appear in the capture; the same job with HETCCL_ENCRYPT=off
must show both (so the check can fail). With --ucx the same again over the
ucx transport on UCX's tcp (UCX_TLS=tcp), where only the payload's marker is
looked for in the plaintext run (the bootstrap is hetccl's own tcp either
way). With --ofi the same over the ofi transport on libfabric's tcp provider
(FI_PROVIDER=tcp on the loopback). Exits 77 (skipped) without tcpdump or
without the right to capture.

  check_wire.py WIRE_JOB [--ucx] [--ofi]
"""
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time


BYTES = 256 << 10  # each rank's part of the AllGather


def free_port_pair():
    """P with P and P + 1 free (hetccl's rendezvous root listens on MASTER_PORT + 1)."""
    for _ in range(200):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p + 1 > 65535:
            continue
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            pass
        finally:
            t.close()
    raise RuntimeError("no free port pair")


def run_job(binary, encrypt, marker, group_tag, transport):
    master = free_port_pair()
    secret = secrets.token_hex(32)
    procs = []
    for r in range(4):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="4", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(master), HETCCL_GROUP=f"{group_tag}{'ab'[r // 2]}", HETCCL_TRANSPORT=transport,
                   HETCCL_ENCRYPT=encrypt, HETCCL_JOB_SECRET=secret, HETCCL_TIMEOUT_S="60", MARKER=marker)
        if transport == "ucx":
            env.update(UCX_TLS="tcp", UCX_WARN_UNUSED_ENV_VARS="n")
        if transport == "ofi":
            env.update(FI_PROVIDER="tcp", FI_TCP_IFACE="lo")
        procs.append(subprocess.Popen([binary, str(BYTES)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        if p.returncode != 0:
            sys.exit(f"rank {r} ({encrypt}) exited {p.returncode}: {err.strip()}")
        outs.append(out.strip())
    return outs


def capture(binary, encrypt, transport):
    marker = "MRK" + secrets.token_hex(6)
    group_tag = "grp" + secrets.token_hex(4)
    with tempfile.TemporaryDirectory() as d:
        pcap = os.path.join(d, "wire.pcap")
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-B", "262144", "-U", "-w", pcap, "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = dump.stderr.readline()  # "listening on lo ..." once capturing
        if "listening" not in line:  # tcpdump's first line once it captures
            dump.kill()
            print(f"tcpdump cannot capture here: {line.strip()}")
            sys.exit(77)
        outs = run_job(binary, encrypt, marker, group_tag, transport)
        time.sleep(0.5)
        dump.terminate()
        stats = dump.stderr.read()
        dump.wait(timeout=10)
        data = open(pcap, "rb").read()
    # A capture that lost packets could miss the very bytes looked for.
    dropped = sum(int(l.split()[0]) for l in stats.splitlines() if "dropped by" in l and l.split()[0].isdigit())
    return outs, data, marker.encode(), group_tag.encode(), dropped


def capture_whole(binary, encrypt, transport, tries=3):
    for _ in range(tries):
        got = capture(binary, encrypt, transport)
        if got[4] == 0:
            return got
        print(f"{encrypt}: the capture dropped {got[4]} packets; again")
    sys.exit(f"{encrypt}: every capture dropped packets")


def main():
    binary = sys.argv[1]
    if not shutil.which("tcpdump"):
        print("tcpdump is not installed")
        return 77
    if os.geteuid() != 0:
        print("capturing needs root")
        return 77
    failures = []
    transports = ["tcp"] + [t for t in ("ucx", "ofi") if f"--{t}" in sys.argv[2:]]
    for transport in transports:
        outs, data, marker, tag, _ = capture_whole(binary, "all", transport)
        print(f"{transport}, encrypted run: {outs[0]}; captured {len(data)} bytes; marker seen {data.count(marker)} "
              f"times, group names seen {data.count(tag)} times")
        if "encrypted_peers=3" not in outs[0]:
            failures.append(f"{transport}: rank 0 reports {outs[0]}, not 3 encrypted peers")
        if len(data) < 3 * BYTES:  # each rank receives the three other parts
            failures.append(f"{transport}: only {len(data)} bytes captured: the capture missed the job")
        if marker in data:
            failures.append(f"{transport}: the payload's marker is on the wire of an encrypted job")
        if tag in data:
            failures.append(f"{transport}: group names (bootstrap records) are on the wire of an encrypted job")
        outs, data, marker, tag, _ = capture_whole(binary, "off", transport)
        print(f"{transport}, plaintext run: {outs[0]}; captured {len(data)} bytes; marker seen {data.count(marker)} "
              f"times, group names seen {data.count(tag)} times")
        if marker not in data or (transport == "tcp" and tag not in data):
            failures.append(f"{transport}: a plaintext job's payload or group names are not in the capture: "
                            "the check sees nothing")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
