use super::*;
use std::process::{Child, Command};

/// Two processes of this user, alive until dropped.
struct Sleepers(Vec<Child>);

impl Drop for Sleepers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A `/tmp` of no feed dir: the scanner only names paths in it.
fn tmp_root() -> PathBuf {
    std::env::temp_dir().join(format!("strata-test-discover-{}", std::process::id()))
}

fn sleepers(n: usize) -> Sleepers {
    Sleepers(
        (0..n)
            .map(|_| Command::new("sleep").arg("600").spawn().expect("sleep"))
            .collect(),
    )
}

#[test]
fn processes_of_one_user_share_their_feed_paths() {
    let tmp = tmp_root();
    let mut scanner = Scanner::new(None, PathBuf::from("/proc"), tmp.clone());
    let children = sleepers(2);
    let infos: Vec<RootInfo> = children
        .0
        .iter()
        .map(|child| {
            scanner
                .root_info(child.id(), None)
                .expect("its status")
                .clone()
        })
        .collect();
    let euid = scanner.euid();
    assert_eq!(&*infos[0].here, tmp.join(format!("strata-{euid}")));
    assert_eq!(
        &*infos[0].in_root,
        &[PathBuf::from(format!("tmp/strata-{euid}"))]
    );
    assert!(Arc::ptr_eq(&infos[0].here, &infos[1].here));
    assert!(Arc::ptr_eq(&infos[0].in_root, &infos[1].in_root));
}

#[test]
fn shared_paths_go_with_the_last_process_holding_them() {
    let tmp = tmp_root();
    let mut scanner = Scanner::new(None, PathBuf::from("/proc"), tmp.clone());
    let children = sleepers(1);
    let pid = children.0[0].id();
    scanner.scan(&[(pid, None)], &HashSet::new(), &|_, _| false);
    assert_eq!(scanner.shared.here.len(), 1);
    // The process is no longer watched: its root and the paths it alone held go.
    scanner.scan(&[], &HashSet::new(), &|_, _| false);
    assert!(scanner.roots.is_empty());
    assert!(scanner.shared.here.is_empty());
    assert!(scanner.shared.in_root.is_empty());
}
