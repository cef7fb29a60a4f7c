//! Loopback TCP ports for the servers a test or benchmark starts beside the daemon.

/// A TCP port of 127.0.0.1 that was free a moment ago: another process may take it before
/// the caller binds it, which on a test machine does not happen in practice.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("a bound address").port()
}
