//! AFL target: the analyze pipeline on arbitrary recordings (see targets/analyze.rs).

#[path = "../../targets/analyze.rs"]
mod target;

fn main() {
    afl::fuzz!(|data: &[u8]| target::run(data));
}
