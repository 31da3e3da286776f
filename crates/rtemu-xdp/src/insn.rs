//! eBPF instructions, hand-assembled: the XDP program is five of them, too few to justify a
//! compiler, an ELF loader or a BPF crate.
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
