//! Export: whether `strata serve` could listen where it would (`--listen`, by default
//! 127.0.0.1:9842), found by binding the address for an instant.

use super::runner::{Lane, Runner};
use super::{Check, Group};

pub(super) fn start(runner: &mut Runner, listen: String) {
    runner.spawn((6, 0), move |lane| export_lane(&lane, &listen));
}

fn export_lane(lane: &Lane, listen: &str) {
    lane.step(
        Group::Export,
        "serve_port",
        None,
        &format!("resolving and binding {listen}"),
        "the name does not resolve in time: check /etc/resolv.conf, or give an address",
    );
    lane.report(serve_port(
        listen,
        crate::serve::bind(listen).map(|l| l.local_addr()),
    ));
}

/// `bound`: what binding `listen` gave (the listener is closed again at once).
fn serve_port(
    listen: &str,
    bound: Result<std::io::Result<std::net::SocketAddr>, crate::serve::ListenError>,
) -> Check {
    match bound {
        Ok(Ok(address)) if address.port() != 0 && listen.ends_with(":0") => Check::ok(
            Group::Export,
            "serve_port",
            &format!("{listen} picks a free port ({address} this time): `strata serve --listen {listen}` listens on whichever is free"),
        ),
        Ok(_) => Check::ok(
            Group::Export,
            "serve_port",
            &format!("{listen} is free: `strata serve` can listen there"),
        ),
        Err(e) => {
            let text = e.to_string();
            let (detail, fix) = match text.split_once(" (hint: ") {
                Some((detail, hint)) => (detail.to_string(), hint.trim_end_matches(')').to_string()),
                None => (text, "choose another address with --listen HOST:PORT".to_string()),
            };
            Check::limited(Group::Export, "serve_port", &detail, &fix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Status;

    #[test]
    fn a_port_in_use_is_limited_with_the_hint_as_the_fix() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let address = held.local_addr().expect("its address").to_string();
        let c = serve_port(
            &address,
            crate::serve::bind(&address).map(|l| l.local_addr()),
        );
        assert_eq!(c.status, Status::Limited);
        assert!(c.detail.contains("the port is in use"), "{}", c.detail);
        assert!(c.fix.as_deref().is_some_and(|f| f.contains("--listen")));
        drop(held);
        let free = serve_port(
            "127.0.0.1:0",
            crate::serve::bind("127.0.0.1:0").map(|l| l.local_addr()),
        );
        assert_eq!(free.status, Status::Ok);
        let bad = serve_port(
            "nonsense",
            crate::serve::bind("nonsense").map(|l| l.local_addr()),
        );
        assert_eq!(bad.status, Status::Limited);
        assert!(bad.detail.contains("not an address"), "{}", bad.detail);
    }
}
