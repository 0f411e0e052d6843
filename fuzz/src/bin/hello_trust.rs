//! AFL target: the way to trust a feed, from `/proc/<pid>/status`, the socket's name, a
//! process's environment and a feed dir's mode to the `hello` checked against them
//! (`strata::feed::fuzz::hello_trust`).

fn main() {
    afl::fuzz!(|data: &[u8]| strata::feed::fuzz::hello_trust(data));
}
