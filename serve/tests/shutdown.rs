//! Signal handling in a process of its own (this test binary): SIGTERM cancels the token the
//! server watches. (A second signal ends the process, so this file sends one.)

use std::time::Duration;

#[tokio::test]
async fn sigterm_cancels_the_servers_token() {
    let token = kube_gang_serve::shutdown::install().expect("the handlers install");
    assert!(!token.is_cancelled());
    rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::TERM).unwrap();
    tokio::time::timeout(Duration::from_secs(20), token.cancelled()).await.expect("cancelled by SIGTERM");
}
