//! AFL target: a client's bytes to `strata serve`, through its own connection code, router
//! and handlers (`strata::serve::fuzz::http`).

fn main() {
    afl::fuzz!(|data: &[u8]| strata::serve::fuzz::http(data));
}
