//! AFL target: the recording reader on arbitrary bytes (see targets/recording_reader.rs).

#[path = "../../targets/recording_reader.rs"]
mod target;

fn main() {
    afl::fuzz!(|data: &[u8]| target::run(data));
}
