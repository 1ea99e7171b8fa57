#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kimi_agent_fuzz::files::check_agent_file(data));
