//! AFL target: a trusted agent's socket delivering arbitrary bytes, split into reads of a
//! size the first byte chooses (`strata::feed::fuzz::feed_line`).

fn main() {
    afl::fuzz!(|data: &[u8]| strata::feed::fuzz::feed_line(data));
}
