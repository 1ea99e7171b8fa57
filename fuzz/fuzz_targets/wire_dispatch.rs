#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kimi_agent_fuzz::wire::check_dispatch(data));
