//! The kernel's names that the `libc` crate (0.2.191) lacks, each with the header it comes
//! from, and the `bpf(2)` call every module shares.
//!
//! `libc` has the AF_XDP socket side (`sockaddr_xdp`, `xdp_umem_reg`, `xdp_mmap_offsets`,
//! `xdp_desc`, `xdp_statistics`, `SOL_XDP`, `XDP_*` options and flags) and classic BPF's opcode
//! classes; it has neither `bpf(2)`'s commands and attribute layouts nor eBPF's own opcodes.
//! Those are here. `bpf_attr` is a union in `include/uapi/linux/bpf.h`; each command gets a
//! struct holding just the prefix of the union member it uses: the kernel reads `size` bytes
//! and treats the rest as zero (`bpf_check_uarg_tail_zero`).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rtemu_sys::errno::cvt;

// `include/uapi/linux/bpf.h`, `enum bpf_cmd`.
/// `BPF_MAP_CREATE`.
pub const BPF_MAP_CREATE: libc::c_int = 0;
/// `BPF_MAP_UPDATE_ELEM`.
pub const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
/// `BPF_PROG_LOAD`.
pub const BPF_PROG_LOAD: libc::c_int = 5;
/// `BPF_LINK_CREATE` (Linux 5.7; for XDP, 5.9).
pub const BPF_LINK_CREATE: libc::c_int = 28;

/// `BPF_MAP_TYPE_XSKMAP` (`enum bpf_map_type`, Linux 4.18).
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP` (`enum bpf_prog_type`).
pub const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` (`enum bpf_attach_type`): the attach type of an XDP link.
pub const BPF_XDP: u32 = 37;
/// `BPF_FUNC_redirect_map` (`enum bpf_func_id`, the `___BPF_FUNC_MAPPER` list).
pub const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `bpf_ktime_get_ns`: `CLOCK_MONOTONIC` now, ns.
pub const BPF_FUNC_KTIME_GET_NS: i32 = 5;
/// `bpf_xdp_adjust_meta`: grows (negative delta) the metadata area before the frame.
pub const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
/// `BPF_PSEUDO_MAP_FD`: the `src_reg` of an `ld_imm64` whose immediate is a map descriptor.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;

// `include/uapi/linux/bpf.h`, `enum xdp_action`.
/// `XDP_PASS`: hand the frame to the kernel's stack.
pub const XDP_PASS: i32 = 2;

/// `offsetof(struct xdp_md, rx_queue_index)` (`include/uapi/linux/bpf.h`: `data`, `data_end`,
/// `data_meta`, `ingress_ifindex`, then `rx_queue_index`, all `__u32`).
pub const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `offsetof(struct xdp_md, data)`.
pub const XDP_MD_DATA: i16 = 0;
/// `offsetof(struct xdp_md, data_meta)`.
pub const XDP_MD_DATA_META: i16 = 8;

// `include/uapi/linux/if_link.h`.
/// `XDP_FLAGS_SKB_MODE`: generic XDP, run on socket buffers after the driver.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, run by the driver.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

// `include/uapi/linux/bpf.h` and `bpf_common.h`: eBPF opcodes beyond classic BPF's.
/// `BPF_ALU64`: 64-bit arithmetic class.
pub const BPF_ALU64: u8 = 0x07;
/// `BPF_DW`: double-word size.
pub const BPF_DW: u8 = 0x18;
/// `BPF_MOV`: move.
pub const BPF_MOV: u8 = 0xb0;
/// `BPF_CALL`: helper call.
pub const BPF_CALL: u8 = 0x80;
/// `BPF_EXIT`: return `r0`.
pub const BPF_EXIT: u8 = 0x90;
/// `BPF_JNE`: jump if not equal.
pub const BPF_JNE: u8 = 0x50;
/// `BPF_JGT`: jump if greater (unsigned).
pub const BPF_JGT: u8 = 0x20;
/// `BPF_STX`: store from a register.
pub const BPF_STX: u8 = 0x03;

/// `bpf_attr` for `BPF_MAP_CREATE`: its fields up to `map_flags`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct MapCreateAttr {
    /// `map_type`.
    pub map_type: u32,
    /// `key_size`.
    pub key_size: u32,
    /// `value_size`.
    pub value_size: u32,
    /// `max_entries`.
    pub max_entries: u32,
    /// `map_flags`.
    pub map_flags: u32,
}

/// `bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct MapElemAttr {
    /// `map_fd`.
    pub map_fd: u32,
    /// Padding to the 8-byte-aligned `key` (`__aligned_u64`).
    pub pad: u32,
    /// `key`: a pointer to the key.
    pub key: u64,
    /// `value`: a pointer to the value.
    pub value: u64,
    /// `flags` (`BPF_ANY`: 0).
    pub flags: u64,
}

/// `bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct ProgLoadAttr {
    /// `prog_type`.
    pub prog_type: u32,
    /// `insn_cnt`.
    pub insn_cnt: u32,
    /// `insns`: a pointer to the instructions.
    pub insns: u64,
    /// `license`: a pointer to a NUL-terminated string.
    pub license: u64,
    /// `log_level`.
    pub log_level: u32,
    /// `log_size`.
    pub log_size: u32,
    /// `log_buf`: a pointer to the verifier's log buffer.
    pub log_buf: u64,
    /// `kern_version` (unused for XDP).
    pub kern_version: u32,
    /// `prog_flags`.
    pub prog_flags: u32,
    /// `prog_name` (`BPF_OBJ_NAME_LEN` = 16, NUL-terminated).
    pub prog_name: [u8; 16],
    /// `prog_ifindex` (offload only).
    pub prog_ifindex: u32,
    /// `expected_attach_type`.
    pub expected_attach_type: u32,
}

/// `bpf_attr` for `BPF_LINK_CREATE`, its fixed part.
#[repr(C)]
#[derive(Debug, Default)]
pub struct LinkCreateAttr {
    /// `prog_fd`.
    pub prog_fd: u32,
    /// `target_ifindex` (a union with `target_fd`).
    pub target_ifindex: u32,
    /// `attach_type`.
    pub attach_type: u32,
    /// `flags` (for XDP: `XDP_FLAGS_*`).
    pub flags: u32,
}

/// `bpf(cmd, attr, size_of(A))`, returning a new descriptor for the commands that make one.
///
/// # Safety
///
/// Every pointer field of `attr` must point to memory that is valid for the kernel to read
/// (and, for a log buffer, write) for the length the attribute gives, during the call.
pub unsafe fn bpf_fd<A>(cmd: libc::c_int, attr: &mut A) -> io::Result<OwnedFd> {
    // SAFETY: the caller vouches for the pointers in `attr`.
    let ret = unsafe { bpf(cmd, attr)? };
    // SAFETY: the commands passed here return a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret) })
}

/// `bpf(cmd, attr, size_of(A))`, its non-negative result.
///
/// # Safety
///
/// As [`bpf_fd`].
pub unsafe fn bpf<A>(cmd: libc::c_int, attr: &mut A) -> io::Result<libc::c_int> {
    // SAFETY: `attr` is a live, writable `A` of the size passed; the pointers inside it are the
    // caller's to vouch for.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut A).cast::<libc::c_void>(),
            std::mem::size_of::<A>() as libc::c_uint,
        )
    };
    cvt(ret as libc::c_int)
}

/// `setsockopt(fd, SOL_XDP, name, value)`.
pub fn set_xdp_option<T>(fd: BorrowedFd<'_>, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the size passed; the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, SOL_XDP, name)` into a `T` that is valid when zeroed; returns it and the
/// length the kernel wrote.
pub fn get_xdp_option<T: Copy>(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<(T, usize)> {
    // SAFETY: the XDP option structs (`xdp_mmap_offsets`, `xdp_statistics`) are plain integers,
    // for which all-zero bytes are a valid value.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and writable, and `len` holds `value`'s size, so the
    // kernel writes at most that many bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok((value, len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_layouts_match_the_kernel_header() {
        // Sizes and offsets from `pahole` on `union bpf_attr` (Linux 6.x).
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 20);
        assert_eq!(std::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(std::mem::offset_of!(MapElemAttr, key), 8);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, insns), 8);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
    }
}
