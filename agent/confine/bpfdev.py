"""A cgroup v2 device filter: an eBPF program (``BPF_PROG_TYPE_CGROUP_DEVICE``) built and attached
with the ``bpf(2)`` system call through ``ctypes``, no new dependency.

cgroup v2 has no ``devices.allow`` file: the kernel asks the eBPF programs attached to a process's
cgroup (and its ancestors) on every ``open``/``mknod`` of a device node. Each program sees
``struct bpf_cgroup_dev_ctx`` (``access_type`` = access << 16 | type, ``major``, ``minor``, all
``u32``) and returns 1 (allow) or 0 (deny, ``EPERM``). docs/security.md explains the fence.

The program built here guards only NVIDIA character devices: an access to a character device
whose major is one of ``guarded_majors`` is allowed only for the listed ``(major, minor)``
pairs (``minor`` None = any minor of that major); every other device is allowed, so a rank keeps
``/dev/null``, its terminal, InfiniBand verbs and the rest. It is attached with
``BPF_F_ALLOW_MULTI``, so programs on ancestor cgroups (systemd's) still apply as well.

Needs ``CAP_SYS_ADMIN`` (or ``CAP_BPF`` and ``CAP_NET_ADMIN``): a root agent.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from collections.abc import Iterable
from dataclasses import dataclass

BPF_PROG_LOAD = 5
BPF_PROG_ATTACH = 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6  # attach type
BPF_F_ALLOW_MULTI = 2
BPF_DEVCG_DEV_CHAR = 2

_SYS_BPF = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "s390x": 351}
_ATTR_SIZE = 128  # bytes of ``union bpf_attr`` passed; the kernel zero-extends a shorter one

# eBPF opcodes (``<linux/bpf_common.h>``, ``<linux/bpf.h>``)
_LDX_MEM_W = 0x61  # dst = *(u32 *)(src + off)
_ALU64_AND_K = 0x57  # dst &= imm
_ALU64_MOV_K = 0xB7  # dst = imm
_JNE_K = 0x55  # if dst != imm goto pc + 1 + off
_EXIT = 0x95

_R0, _R1, _R2, _R3, _R4 = range(5)


class BpfError(OSError):
    """``bpf(2)`` failed: the program was refused by the verifier or the attach was not allowed.

    ``errno`` is the system call's; the message names the step and, for a load, the verifier log.
    """


@dataclass(frozen=True, slots=True)
class DeviceRule:
    """One allowed character device: ``major`` and ``minor`` (None = every minor of ``major``)."""

    major: int
    minor: int | None

    def __post_init__(self) -> None:
        if not 0 <= self.major < 1 << 12:
            raise ValueError(f"major: {self.major!r} is not a device major number (allowed: 0..4095)")
        if self.minor is not None and not 0 <= self.minor < 1 << 20:
            raise ValueError(f"minor: {self.minor!r} is not a device minor number (allowed: 0..1048575)")


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """One ``struct bpf_insn`` (8 bytes, little-endian as on every host this runs on)."""
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def device_filter_program(allowed: Iterable[DeviceRule], guarded_majors: Iterable[int]) -> bytes:
    """The eBPF instructions of the device filter (see the module docstring).

    Args:
        allowed: the character devices the cgroup may open.
        guarded_majors: majors whose devices are denied unless ``allowed`` lists them.

    Returns:
        The program, 8 bytes per instruction, for :func:`load_device_filter`.
    """
    rules = sorted(set(allowed), key=lambda r: (r.major, -1 if r.minor is None else r.minor))
    guarded = sorted(set(guarded_majors))
    body: list[bytes] = []
    for rule in rules:
        if rule.minor is None:
            body += [_insn(_JNE_K, _R3, imm=rule.major, off=2), _insn(_ALU64_MOV_K, _R0, imm=1), _insn(_EXIT)]
        else:
            body += [
                _insn(_JNE_K, _R3, imm=rule.major, off=3),
                _insn(_JNE_K, _R4, imm=rule.minor, off=2),
                _insn(_ALU64_MOV_K, _R0, imm=1),
                _insn(_EXIT),
            ]
    for major in guarded:
        body += [_insn(_JNE_K, _R3, imm=major, off=2), _insn(_ALU64_MOV_K, _R0, imm=0), _insn(_EXIT)]
    head = [
        _insn(_LDX_MEM_W, _R2, _R1, off=0),  # access_type
        _insn(_ALU64_AND_K, _R2, imm=0xFFFF),  # its device type
        _insn(_LDX_MEM_W, _R3, _R1, off=4),  # major
        _insn(_LDX_MEM_W, _R4, _R1, off=8),  # minor
        _insn(_JNE_K, _R2, imm=BPF_DEVCG_DEV_CHAR, off=len(body)),  # not a character device: allow
    ]
    tail = [_insn(_ALU64_MOV_K, _R0, imm=1), _insn(_EXIT)]
    return b"".join(head + body + tail)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    number = _SYS_BPF.get(platform.machine())
    if number is None:
        raise BpfError(0, f"bpf: no system call number known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.syscall(number, cmd, attr, _ATTR_SIZE))
    if result < 0:
        err = ctypes.get_errno()
        raise BpfError(err, os.strerror(err))
    return result


def load_device_filter(program: bytes) -> int:
    """Load ``program`` as a ``BPF_PROG_TYPE_CGROUP_DEVICE`` program; return its file descriptor.

    Raises:
        BpfError: the kernel refused it (message: errno text and the verifier's log).
    """
    insns = ctypes.create_string_buffer(program, len(program))
    license_ = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(4096)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into(
        "<IIQQIIQII16sII",
        attr,
        0,
        BPF_PROG_TYPE_CGROUP_DEVICE,
        len(program) // 8,
        ctypes.addressof(insns),
        ctypes.addressof(license_),
        1,  # log level: the verifier explains a refusal
        len(log),
        ctypes.addressof(log),
        0,
        0,
        b"labgang_devs",
        0,
        BPF_CGROUP_DEVICE,
    )
    try:
        return _bpf(BPF_PROG_LOAD, attr)
    except BpfError as exc:
        verifier = log.value.decode(errors="replace").strip()
        raise BpfError(exc.errno, f"BPF_PROG_LOAD: {exc.strerror}" + (f": {verifier}" if verifier else "")) from None


def attach_device_filter(cgroup_dir: str, prog_fd: int) -> None:
    """Attach a loaded device filter to the cgroup v2 directory ``cgroup_dir`` (``BPF_F_ALLOW_MULTI``).

    The attachment lives as long as the cgroup; ``prog_fd`` may be closed afterwards.

    Raises:
        BpfError: the kernel refused the attach. OSError: ``cgroup_dir`` cannot be opened.
    """
    fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        attr = ctypes.create_string_buffer(_ATTR_SIZE)
        struct.pack_into("<IIII", attr, 0, fd, prog_fd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI)
        try:
            _bpf(BPF_PROG_ATTACH, attr)
        except BpfError as exc:
            raise BpfError(exc.errno, f"BPF_PROG_ATTACH to {cgroup_dir}: {exc.strerror}") from None
    finally:
        os.close(fd)


def install_device_filter(cgroup_dir: str, allowed: Iterable[DeviceRule], guarded_majors: Iterable[int]) -> None:
    """Build, load and attach the device filter of ``cgroup_dir`` (the program's fd is closed after).

    Raises:
        BpfError: the kernel refused the program or the attach.
    """
    fd = load_device_filter(device_filter_program(allowed, guarded_majors))
    try:
        attach_device_filter(cgroup_dir, fd)
    finally:
        os.close(fd)
