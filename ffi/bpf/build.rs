//! Links the system libbpf (Debian `libbpf-dev`, 1.x) found by pkg-config.

fn main() {
    if let Err(e) = pkg_config::Config::new()
        .atleast_version("1.0")
        .probe("libbpf")
    {
        panic!(
            "barrier-bpf needs libbpf >= 1.0 and its pkg-config file (Debian: apt-get install \
             libbpf-dev, or run scripts/setup.sh): {e}"
        );
    }
}
