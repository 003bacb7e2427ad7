"""One run's sandbox inside a keeper (a long-lived grading container): the kernel's
namespaces, made from the keeper's root. Standard library and ctypes only, Python 3.9+.

The keeper runs with a grading container's five capabilities plus SETFCAP (the kernel asks
it of a user namespace map that maps uid 0), Docker's seccomp profile plus unshare, setns,
mount, umount2 and pivot_root, and /proc unmasked (a new /proc would not mount otherwise).
Each run takes all of that away again, in three processes:

- **first**, forked by the keeper's server: its standard input /dev/null, its output and
  error the run's pipes, every other descriptor closed. It unshares a user namespace
  (uids and gids 0..65535 mapped to themselves, so the image's files keep their owners;
  the server writes the map), and mount, PID, IPC, UTS, network and cgroup namespaces. Its
  OOM score is 1000: the kernel's OOM killer takes the run's processes, never the server.
- **init**, first's child and PID 1 of the run's PID namespace: the run's command itself,
  as in a container. Before it becomes the command, at the run's level, it makes the mounts:
  every mount read-only (keeping the flags the keeper's namespace locked), tmpfs on /run,
  /tmp, /var/tmp and /dev/shm, the repository and the files' root as overlays whose upper
  layers go with the run, a new /proc with Docker's masks put back; and brings the loopback
  up. Then the command's level: a user and mount namespace of its own below the run's, so
  that every mount above is locked as it is even for its root; the bounding set cut to the
  five capabilities; no_new_privs and a seccomp filter refusing what the keeper's profile
  had to allow (unshare, setns, mount, umount2, pivot_root, clone with a namespace flag;
  clone3 is ENOSYS, its flags out of a filter's reach, and libc falls back to clone).
- When init ends, the kernel ends every process of the PID namespace; the mount namespace
  and its tmpfs go with the last of them. The server kills init (it learns init's pid from
  first) when the run's time is up.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import signal
import socket
import struct
import time
from collections.abc import Callable

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP = 0x10000000, 0x20000000, 0x40000000, 0x02000000
NS_FLAGS = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_BIND_RO = MS_BIND | MS_REMOUNT | MS_RDONLY
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 38, 22, 24
SECCOMP_MODE_FILTER = 2
# CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_KILL, CAP_SETGID, CAP_SETUID: a grading container's
COMMAND_CAPS = {0, 1, 5, 6, 7}
# Docker's masks (moby's oci.DefaultSpec): files hidden under /dev/null, directories under an
# empty read-only tmpfs; and the paths it makes read-only
MASKED = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
]
READ_ONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
SCRATCH = ["/run", "/tmp", "/var/tmp", "/dev/shm"]
# The keeper's volume, on the host's filesystem: the repository's upper layer goes there
# (disk, like a container's writable layer; overlayfs in a user namespace marks directories
# opaque with user xattrs, which the host's filesystem takes). Hidden from each run, cleared
# after it.
UPPERS = "/var/lib/grader-pool"
FLAG_OF = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": 1024,
    "nodiratime": 2048,
    "relatime": 1 << 21,
}


def status_code(status: int) -> int:
    """A wait status as a container's exit status: a death by signal N is 128 + N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def mount(src: str, target: str, fstype: str, flags: int, data: str = "") -> None:
    check(
        libc.mount(src.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode() or None),
        f"mount {target}",
    )


def mounts() -> list[tuple[str, int]]:
    """Each mount point and its flags (a remount must keep those the parent's namespace locked)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            flags = 0
            for opt in fields[5].split(","):
                flags |= FLAG_OF.get(opt, 0)
            out.append((fields[4].replace("\\040", " "), flags))
    return out


# --- seccomp ---------------------------------------------------------------------------------
AUDIT_ARCH_X86_64 = 0xC000003E
REFUSED_X86_64 = {"unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155}
CLONE, CLONE3 = 56, 435
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x45, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
EPERM, ENOSYS = 1, 38


def seccomp_filter() -> bytes:
    """A classic BPF program: another architecture's call kills the process; the calls above
    are EPERM, and clone with any namespace flag; clone3 is ENOSYS; everything else is allowed
    here (Docker's own filter, stacked under this one, still decides it)."""
    insns: list[tuple[int, int, int, int]] = []

    def ins(code: int, jt: int, jf: int, k: int) -> None:
        insns.append((code, jt, jf, k))

    refused = list(REFUSED_X86_64.values())
    # indexes: 0 arch, 1 check, 2 kill, 3 nr, 4.. refused, then clone, its flags, jset, clone3,
    # ENOSYS, EPERM, ALLOW; a jump's target is its own index + 1 + the offset
    eperm_at = 4 + len(refused) + 5
    allow_at = eperm_at + 1
    ins(BPF_LD_W_ABS, 0, 0, 4)  # seccomp_data.arch
    ins(BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64)
    ins(BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS)
    ins(BPF_LD_W_ABS, 0, 0, 0)  # seccomp_data.nr
    for nr in refused:
        ins(BPF_JEQ_K, eperm_at - len(insns) - 1, 0, nr)
    ins(BPF_JEQ_K, 0, 2, CLONE)  # clone: read its flags; else on to clone3
    ins(BPF_LD_W_ABS, 0, 0, 16)  # seccomp_data.args[0], low 32 bits: clone's flags
    ins(BPF_JSET_K, eperm_at - len(insns) - 1, allow_at - len(insns) - 1, NS_FLAGS)
    ins(BPF_JEQ_K, 0, allow_at - len(insns) - 1, CLONE3)
    ins(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS)
    if len(insns) != eperm_at:
        raise AssertionError("the seccomp program's jumps are off")
    ins(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM)
    ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)
    return b"".join(struct.pack("HBBI", *i) for i in insns)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_seccomp() -> None:
    if os.uname().machine != "x86_64":
        raise OSError("the pool's seccomp filter is written for x86_64 only")
    prog = seccomp_filter()
    buf = ctypes.create_string_buffer(prog)
    fprog = _SockFprog(len(prog) // 8, ctypes.addressof(buf))
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def keep_caps_only(caps: set[int]) -> None:
    """This process's effective and permitted sets cut to `caps`, its inheritable emptied
    (a process that does not exec keeps what its user namespace gave it otherwise)."""
    mask = sum(1 << c for c in caps)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    for i in range(2):
        part = (mask >> (32 * i)) & 0xFFFFFFFF
        data[i].effective, data[i].permitted, data[i].inheritable = part, part, 0
    check(libc.capset(ctypes.byref(header), data), "capset")


# --- the run's level -------------------------------------------------------------------------
def loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        ifr = struct.pack("16sH", b"lo", 0) + b"\0" * 22
        flags = struct.unpack("16sH", fcntl.ioctl(s, siocgifflags, ifr)[:18])[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up) + b"\0" * 22)
    finally:
        s.close()


def like(path: str, model: str) -> None:
    """`path` given `model`'s owner and mode (an overlay's root takes its upper layer's)."""
    st = os.stat(model)
    os.chown(path, st.st_uid, st.st_gid)
    os.chmod(path, st.st_mode & 0o7777)


def overlay(target: str, base: str, flags: int = 0) -> None:
    """`target` seen through an overlay whose upper layer is `base`/upper (made here)."""
    os.makedirs(f"{base}/upper", mode=0o700)
    os.makedirs(f"{base}/work", mode=0o700)
    like(f"{base}/upper", target)
    mount("overlay", target, "overlay", flags, f"lowerdir={target},upperdir={base}/upper,workdir={base}/work,userxattr")


def set_up_mounts(repo: str, files_root: str, tmp_bytes: int) -> None:
    mount("none", "/", "", MS_REC | MS_PRIVATE)
    for d in SCRATCH:
        if os.path.isdir(d):
            size = min(tmp_bytes, 64 << 20) if d == "/dev/shm" else tmp_bytes
            mode = "755" if d == "/run" else "1777"
            mount("scratch", d, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode={mode}")
    # the writable trees, the outer first: the repository (unless it is / itself) and the files' root
    trees = sorted({repo, files_root} - {"/"}, key=len)
    for tree in trees:
        if any(tree == d or tree.startswith(f"{d}/") for d in SCRATCH):
            raise OSError(f"{tree} is under a scratch directory the pool gives each run empty")
        if tree == files_root:
            overlay(tree, "/run/.files", MS_NOSUID | MS_NODEV)
        else:
            base = f"{UPPERS}/run-{os.getpid()}-{time.monotonic_ns()}" if os.path.isdir(UPPERS) else "/run/.repo"
            overlay(tree, base)
    if os.path.isdir(UPPERS):
        mount("hidden", UPPERS, "tmpfs", MS_RDONLY, "size=4k")  # the volume out of the run's sight
    keep = {*trees, *SCRATCH, "/proc", UPPERS}
    for target, flags in mounts():
        if target in keep or target.startswith(("/proc/", "/run/")):
            continue
        try:
            mount("", target, "", MS_BIND_RO | flags)
        except OSError as exc:
            raise OSError(exc.errno, f"read-only {target}: {exc}") from exc
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in MASKED:
        if os.path.isdir(path):
            mount("masked", path, "tmpfs", MS_RDONLY)
        elif os.path.exists(path):
            mount("/dev/null", path, "", MS_BIND)
    for path in READ_ONLY:
        if os.path.exists(path):
            mount(path, path, "", MS_BIND | MS_REC)
            mount("", path, "", MS_BIND_RO | MS_REC)


def write_maps(proc: int, pid: int) -> None:
    """Map uids and gids 0..65535 to themselves in `pid`'s new user namespace, `proc` a
    descriptor of the /proc that names it."""
    for name, text in (("uid_map", "0 0 65536\n"), ("setgroups", "allow\n"), ("gid_map", "0 0 65536\n")):
        fd = os.open(f"{pid}/{name}", os.O_WRONLY, dir_fd=proc)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def only_fds(keep: set[int]) -> None:
    """Close every descriptor of this process but `keep` (and 0, 1, 2)."""
    keep = keep | {0, 1, 2}
    last = 0
    for fd in sorted(keep):
        if fd > last:  # os.closerange(n, n) would close everything from n up
            os.closerange(last, fd)
        last = fd + 1
    os.closerange(last, os.sysconf("SC_OPEN_MAX"))


def _say(fd: int, data: bytes) -> None:
    os.write(fd, data)


def _hear(fd: int) -> None:
    if os.read(fd, 1) != b"1":
        os._exit(125)  # the other side is gone


def first(
    to_server: int,
    from_server: int,
    init_body: Callable[[Callable[[], None]], None],
    keep: set[int],
) -> None:
    """The run's first process (never returns). `to_server`/`from_server`: its pipes to the
    keeper's server, which writes its user namespace's map when told and learns init's pid.
    `init_body(become_command)` runs in init, at the run's level, with `keep` still open: it
    makes the run's mounts, then calls `become_command()` (which makes the command's level)
    and becomes the command."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # the kernel's OOM killer takes the run's processes, never the server
        check(libc.unshare(NS_FLAGS), "unshare")
        _say(to_server, b"1")
        _hear(from_server)
        os.close(from_server)
        proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)  # the keeper's /proc, still naming init after its own
        up_r, up_w = os.pipe()
        go_r, go_w = os.pipe()
        init = os.fork()
        if init == 0:
            os.close(up_r)
            os.close(go_w)
            only_fds({up_w, go_r, *keep})
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)

            def become_command() -> None:
                check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare (the command's level)")
                _say(up_w, b"1")
                _hear(go_r)
                os.close(up_w)
                os.close(go_r)
                os.setresgid(0, 0, 0)
                os.setresuid(0, 0, 0)
                for cap in range(64):
                    if cap not in COMMAND_CAPS:
                        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
                keep_caps_only(COMMAND_CAPS)
                libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # a change of credentials cleared it
                install_seccomp()

            try:
                init_body(become_command)
            except BaseException as exc:  # noqa: BLE001 - said on the run's standard error, exit 125
                os.write(2, f"grader pool: {type(exc).__name__}: {exc}\n".encode())
            os._exit(125)
        os.close(up_w)
        os.close(go_r)
        for fd in keep:
            os.close(fd)
        _say(to_server, f"{init}\n".encode())
        os.close(to_server)
        if os.read(up_r, 1) == b"1":
            write_maps(proc, init)
            _say(go_w, b"1")
        os.close(proc)
        os.close(go_w)
        os.close(up_r)
        _, status = os.waitpid(init, 0)
        os._exit(status_code(status) & 0xFF)
    except BaseException as exc:  # noqa: BLE001 - said on the run's standard error, exit 125
        os.write(2, f"grader pool: {type(exc).__name__}: {exc}\n".encode())
    os._exit(125)
