#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rtemu_fuzz::part(data));
