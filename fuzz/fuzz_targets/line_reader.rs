#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kimi_agent_fuzz::wire::check_line_reader(data));
