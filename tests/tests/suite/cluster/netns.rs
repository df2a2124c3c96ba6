//! Network partitions made by the test: a network namespace joined to the test's own by one
//! veth pair per path, each pair a /30 of `10.123.<n>.0/24` (`n` chosen free at random).
//! Cutting a path takes its host-side link down: packets are dropped and nobody sends a
//! reset — what a real partition looks like to TCP. Dropping the value deletes the
//! namespace, and with it the links.

use std::process::Command;

/// A network namespace with veth paths to the test's own namespace.
pub struct Netns {
    pub name: String,
    paths: Vec<VethPath>,
}

struct VethPath {
    host_if: String,
    host_addr: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`ip` is needed for the partition tests (iproute2): {e}"));
    assert!(
        out.status.success(),
        "`ip {}` failed — the partition tests need CAP_NET_ADMIN (network namespaces, veth): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl Netns {
    /// A namespace with `paths` veth pairs to this one; path `i` has the host address
    /// `10.123.n.(4i+1)` and the namespace address `10.123.n.(4i+2)`.
    pub fn create(paths: usize) -> Self {
        assert!(paths <= 60);
        let subnet = loop {
            let n = rand::random::<u8>();
            let used = Command::new("ip")
                .args(["-o", "addr", "show", "to", &format!("10.123.{n}.0/24")])
                .output()
                .map(|o| !o.stdout.is_empty())
                .unwrap_or(false);
            if !used {
                break n;
            }
        };
        let tag = format!("{:06x}", rand::random::<u32>() & 0xff_ffff);
        let name = format!("tsnet{tag}");
        ip(&["netns", "add", &name]);
        let mut ns = Self {
            name,
            paths: Vec::new(),
        };
        ns.exec_ip(&["link", "set", "lo", "up"]);
        for i in 0..paths {
            let (host_if, ns_if) = (format!("ts{tag}h{i}"), format!("ts{tag}n{i}"));
            let host_addr = format!("10.123.{subnet}.{}", 4 * i + 1);
            let ns_addr = format!("10.123.{subnet}.{}", 4 * i + 2);
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ]);
            ip(&["link", "set", &ns_if, "netns", &ns.name]);
            ip(&["addr", "add", &format!("{host_addr}/30"), "dev", &host_if]);
            ip(&["link", "set", &host_if, "up"]);
            ns.exec_ip(&["addr", "add", &format!("{ns_addr}/30"), "dev", &ns_if]);
            ns.exec_ip(&["link", "set", &ns_if, "up"]);
            ns.paths.push(VethPath { host_if, host_addr });
        }
        ns
    }

    fn exec_ip(&self, args: &[&str]) {
        let mut all = vec!["netns", "exec", self.name.as_str(), "ip"];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// This namespace's address of path `i`: what a process inside reaches it by.
    pub fn host_addr(&self, i: usize) -> &str {
        &self.paths[i].host_addr
    }

    /// Partitions path `i` (packets dropped silently) until [`Self::heal`].
    pub fn cut(&self, i: usize) {
        ip(&["link", "set", &self.paths[i].host_if, "down"]);
    }

    pub fn heal(&self, i: usize) {
        ip(&["link", "set", &self.paths[i].host_if, "up"]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth ends, and so the pairs.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
