//! eBPF instructions, hand-assembled: the XDP programs are six and nineteen of them, too few to
//! justify a compiler, an ELF loader or a BPF crate.
//!
//! The encoding is `struct bpf_insn` of `include/uapi/linux/bpf.h`: an 8-bit opcode, the
//! destination register in the low nibble and the source register in the high nibble of one
//! byte (little-endian bit fields), a signed 16-bit offset and a signed 32-bit immediate.
//! `ld_imm64` takes two slots, the second holding the immediate's upper half. The opcodes are
//! documented in the kernel's `Documentation/bpf/standardization/instruction-set.rst`.

use crate::sys;

/// One eBPF instruction, as the kernel reads it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode: class, size or operation, source.
    pub code: u8,
    /// Destination register (low nibble) and source register (high nibble).
    pub regs: u8,
    /// Signed offset (memory access, jumps).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

/// An eBPF register, `r0` to `r10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reg {
    /// Return value, and a helper's result.
    R0 = 0,
    /// First argument; the context (`struct xdp_md *`) at entry.
    R1 = 1,
    /// Second argument.
    R2 = 2,
    /// Third argument.
    R3 = 3,
    /// Fourth argument.
    R4 = 4,
    /// Callee-saved: kept across helper calls.
    R6 = 6,
    /// Callee-saved.
    R7 = 7,
}

impl Insn {
    const fn new(code: u8, dst: Reg, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst as u8 & 0x0f),
            off,
            imm,
        }
    }

    /// `dst = *(u32 *)(src + off)`.
    pub const fn load_u32(dst: Reg, src: Reg, off: i16) -> Insn {
        let code = (libc::BPF_LDX | libc::BPF_MEM | libc::BPF_W) as u8;
        Insn::new(code, dst, src as u8, off, 0)
    }

    /// `*(u64 *)(dst + off) = src`.
    pub const fn store_u64(dst: Reg, off: i16, src: Reg) -> Insn {
        let code = sys::BPF_STX | libc::BPF_MEM as u8 | sys::BPF_DW;
        Insn::new(code, dst, src as u8, off, 0)
    }

    /// `dst = src` (64-bit).
    pub const fn mov64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::new(
            sys::BPF_ALU64 | sys::BPF_MOV | libc::BPF_X as u8,
            dst,
            src as u8,
            0,
            0,
        )
    }

    /// `dst += imm` (64-bit).
    pub const fn add64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(
            sys::BPF_ALU64 | libc::BPF_ADD as u8 | libc::BPF_K as u8,
            dst,
            0,
            0,
            imm,
        )
    }

    /// `if dst != imm goto +off`.
    pub const fn jne_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(
            libc::BPF_JMP as u8 | sys::BPF_JNE | libc::BPF_K as u8,
            dst,
            0,
            off,
            imm,
        )
    }

    /// `if dst > src goto +off` (unsigned).
    pub const fn jgt_reg(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(
            libc::BPF_JMP as u8 | sys::BPF_JGT | libc::BPF_X as u8,
            dst,
            src as u8,
            off,
            0,
        )
    }

    /// `dst = imm` (64-bit move of a sign-extended 32-bit immediate).
    pub const fn mov64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(
            sys::BPF_ALU64 | sys::BPF_MOV | libc::BPF_K as u8,
            dst,
            0,
            0,
            imm,
        )
    }

    /// `dst = map` where the kernel swaps the descriptor `fd` for the map's address at load
    /// time (`ld_imm64` with `BPF_PSEUDO_MAP_FD`): two slots.
    pub const fn load_map_fd(dst: Reg, fd: i32) -> [Insn; 2] {
        let code = libc::BPF_LD as u8 | sys::BPF_DW | libc::BPF_IMM as u8;
        [
            Insn::new(code, dst, sys::BPF_PSEUDO_MAP_FD, 0, fd),
            Insn {
                code: 0,
                regs: 0,
                off: 0,
                imm: 0,
            },
        ]
    }

    /// Calls kernel helper number `helper` with `r1`–`r5` as arguments; the result is in `r0`.
    pub const fn call(helper: i32) -> Insn {
        Insn::new(libc::BPF_JMP as u8 | sys::BPF_CALL, Reg::R0, 0, 0, helper)
    }

    /// Returns `r0`.
    pub const fn exit() -> Insn {
        Insn::new(libc::BPF_JMP as u8 | sys::BPF_EXIT, Reg::R0, 0, 0, 0)
    }
}

/// The XDP program: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`
///
/// The frame goes to the AF_XDP socket the map holds for the receive queue it arrived on; where
/// the map holds none, the low bits of the flags argument (Linux 5.3 and later) make the
/// helper return `XDP_PASS`, so the frame goes up the kernel's stack instead of being dropped.
pub fn redirect_to_xsk(map_fd: i32) -> [Insn; 6] {
    let [map_lo, map_hi] = Insn::load_map_fd(Reg::R1, map_fd);
    [
        Insn::load_u32(Reg::R2, Reg::R1, sys::XDP_MD_RX_QUEUE_INDEX),
        map_lo,
        map_hi,
        Insn::mov64_imm(Reg::R3, sys::XDP_PASS),
        Insn::call(sys::BPF_FUNC_REDIRECT_MAP),
        Insn::exit(),
    ]
}

/// Bytes of metadata [`stamp_and_redirect`] puts before each frame: its arrival time.
pub const STAMP_BYTES: u32 = 8;

/// The XDP program with an arrival stamp:
///
/// ```c
/// u64 now = bpf_ktime_get_ns();
/// if (bpf_xdp_adjust_meta(ctx, -8) == 0) {
///     u64 *meta = (void *)(long)ctx->data_meta;
///     if (meta + 1 <= (void *)(long)ctx->data)
///         *meta = now;
/// }
/// return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
/// ```
///
/// `bpf_ktime_get_ns` reads `CLOCK_MONOTONIC`, the engine's clock, when the driver runs the
/// program on the frame: the kernel-side arrival time AF_XDP otherwise lacks (copy mode on veth
/// has no receive timestamp). The kernel copies the metadata into the socket's chunk right
/// before the frame, where user space reads it. Where the metadata area cannot grow, the frame
/// is redirected without a stamp.
pub fn stamp_and_redirect(map_fd: i32) -> [Insn; 20] {
    let [map_lo, map_hi] = Insn::load_map_fd(Reg::R1, map_fd);
    [
        Insn::mov64_reg(Reg::R6, Reg::R1),
        Insn::call(sys::BPF_FUNC_KTIME_GET_NS),
        Insn::mov64_reg(Reg::R7, Reg::R0),
        Insn::mov64_reg(Reg::R1, Reg::R6),
        Insn::mov64_imm(Reg::R2, -(STAMP_BYTES as i32)),
        Insn::call(sys::BPF_FUNC_XDP_ADJUST_META),
        // Failed: skip the 6 instructions of the store.
        Insn::jne_imm(Reg::R0, 0, 6),
        // Packet pointers are invalid after the call: read them again.
        Insn::load_u32(Reg::R2, Reg::R6, sys::XDP_MD_DATA),
        Insn::load_u32(Reg::R3, Reg::R6, sys::XDP_MD_DATA_META),
        Insn::mov64_reg(Reg::R4, Reg::R3),
        Insn::add64_imm(Reg::R4, STAMP_BYTES as i32),
        // The verifier's bounds check: the metadata area holds the stamp.
        Insn::jgt_reg(Reg::R4, Reg::R2, 1),
        Insn::store_u64(Reg::R3, 0, Reg::R7),
        Insn::mov64_reg(Reg::R1, Reg::R6),
        Insn::load_u32(Reg::R2, Reg::R6, sys::XDP_MD_RX_QUEUE_INDEX),
        map_lo,
        map_hi,
        Insn::mov64_imm(Reg::R3, sys::XDP_PASS),
        Insn::call(sys::BPF_FUNC_REDIRECT_MAP),
        Insn::exit(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instruction's eight bytes as the kernel reads them (little-endian).
    fn bytes(i: Insn) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = i.code;
        b[1] = i.regs;
        b[2..4].copy_from_slice(&i.off.to_le_bytes());
        b[4..8].copy_from_slice(&i.imm.to_le_bytes());
        b
    }

    #[test]
    fn instructions_encode_as_llvm_emits_them() {
        // From `llvm-objdump -d` of the same program compiled with clang -target bpf.
        assert_eq!(
            bytes(Insn::load_u32(Reg::R2, Reg::R1, 16)),
            [0x61, 0x12, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00]
        );
        assert_eq!(
            bytes(Insn::mov64_imm(Reg::R3, 2)),
            [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00]
        );
        assert_eq!(
            bytes(Insn::call(51)),
            [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00]
        );
        assert_eq!(bytes(Insn::exit()), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        let [lo, hi] = Insn::load_map_fd(Reg::R1, 7);
        assert_eq!(bytes(lo), [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00]);
        assert_eq!(bytes(hi), [0; 8]);
    }

    #[test]
    fn the_stamping_program_encodes_as_llvm_emits_it_and_its_jumps_land() {
        // From `llvm-objdump -d` of the same operations compiled with clang -target bpf.
        assert_eq!(
            bytes(Insn::mov64_reg(Reg::R6, Reg::R1)),
            [0xbf, 0x16, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            bytes(Insn::add64_imm(Reg::R4, 8)),
            [0x07, 0x04, 0, 0, 0x08, 0, 0, 0]
        );
        assert_eq!(
            bytes(Insn::jne_imm(Reg::R0, 0, 7)),
            [0x55, 0x00, 0x07, 0x00, 0, 0, 0, 0]
        );
        assert_eq!(
            bytes(Insn::jgt_reg(Reg::R4, Reg::R2, 1)),
            [0x2d, 0x24, 0x01, 0x00, 0, 0, 0, 0]
        );
        assert_eq!(
            bytes(Insn::store_u64(Reg::R3, 0, Reg::R7)),
            [0x7b, 0x73, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            bytes(Insn::mov64_imm(Reg::R2, -8)),
            [0xb7, 0x02, 0, 0, 0xf8, 0xff, 0xff, 0xff]
        );
        let p = stamp_and_redirect(9);
        // Each jump lands where the C says: the failed adjust and the failed bounds check both
        // skip the store and go on to the redirect, which starts with `r1 = ctx`.
        let redirect = 13;
        assert_eq!(p[redirect], Insn::mov64_reg(Reg::R1, Reg::R6));
        assert_eq!(p[6].code, 0x55, "jne after the adjust");
        assert_eq!(6 + 1 + p[6].off as usize, redirect, "adjust failed");
        assert_eq!(p[11].code, 0x2d, "jgt of the bounds check");
        assert_eq!(11 + 1 + p[11].off as usize, redirect, "out of bounds");
        assert_eq!(p[12], Insn::store_u64(Reg::R3, 0, Reg::R7));
        assert_eq!(
            (p[15].imm, p[15].regs >> 4),
            (9, sys::BPF_PSEUDO_MAP_FD),
            "the map"
        );
        assert_eq!(p[19], Insn::exit());
    }

    #[test]
    fn the_program_reads_the_queue_before_r1_is_overwritten() {
        let p = redirect_to_xsk(9);
        assert_eq!(std::mem::size_of_val(&p), 48, "8 bytes per slot");
        assert_eq!(
            p[0],
            Insn::load_u32(Reg::R2, Reg::R1, 16),
            "ctx still in r1"
        );
        assert_eq!(p[1].imm, 9);
        assert_eq!(p[1].regs >> 4, sys::BPF_PSEUDO_MAP_FD);
        assert_eq!(
            p[3].imm,
            sys::XDP_PASS,
            "fallback when no socket is in the map"
        );
        assert_eq!(p[5], Insn::exit());
    }
}
