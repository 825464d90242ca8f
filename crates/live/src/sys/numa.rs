//! NUMA topology from sysfs: nodes, their CPUs, memory and distances, the kernel's
//! memory tiers (`/sys/devices/virtual/memory_tiering`, 6.1+), HMAT `access0`
//! performance, and per-node watermarks from `/proc/zoneinfo`.

use super::{parse_list, read_trim};
use serde::Serialize;
use std::path::Path;

/// HMAT performance of a node as seen from its nearest initiator (`access0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Hmat {
    /// Read latency, ns.
    pub read_latency_ns: u64,
    /// Write latency, ns.
    pub write_latency_ns: u64,
    /// Read bandwidth, MB/s.
    pub read_bandwidth_mbps: u64,
    /// Write bandwidth, MB/s.
    pub write_bandwidth_mbps: u64,
}

/// Node watermarks summed over the node's zones, in pages (`/proc/zoneinfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct NodeWatermarks {
    /// Sum of the zones' `min`.
    pub min: u64,
    /// Sum of `low`.
    pub low: u64,
    /// Sum of `high`.
    pub high: u64,
    /// Sum of `managed` pages.
    pub managed: u64,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// Node id.
    pub id: u32,
    /// Its CPUs (empty for a CXL / KMEM-DAX node).
    pub cpus: Vec<u32>,
    /// `MemTotal`, KiB.
    pub mem_total_kb: u64,
    /// `MemFree`, KiB.
    pub mem_free_kb: u64,
    /// Distances to every online node, in node order (`distance`).
    pub distances: Vec<u32>,
    /// The kernel memory tier holding it (`memory_tierN`), if the kernel has tiers.
    pub memory_tier: Option<u32>,
    /// HMAT access0 performance, if the firmware described it.
    pub hmat: Option<Hmat>,
    /// Zone watermarks summed, if `/proc/zoneinfo` lists the node.
    pub watermarks: Option<NodeWatermarks>,
}

/// The machine's nodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    /// Online nodes with memory, in id order.
    pub nodes: Vec<Node>,
}

/// `(MemTotal, MemFree)` in KiB from a node's `meminfo` text.
pub fn parse_node_meminfo(text: &str) -> (u64, u64) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| {
                let (_, rest) = l.split_once(name)?;
                rest.trim_start_matches(':')
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or(0)
    };
    (field("MemTotal:"), field("MemFree:"))
}

/// Per-node watermark sums from `/proc/zoneinfo` text, indexed by node id.
pub fn parse_zoneinfo(text: &str) -> Vec<NodeWatermarks> {
    let mut out: Vec<NodeWatermarks> = Vec::new();
    let mut cur: Option<usize> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Node ") {
            cur = rest.split(',').next().and_then(|n| n.trim().parse().ok());
            if let Some(n) = cur {
                if out.len() <= n {
                    out.resize(n + 1, NodeWatermarks::default());
                }
            }
            continue;
        }
        let (Some(n), Some((k, v))) = (cur, t.split_once(char::is_whitespace)) else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        let w = &mut out[n];
        match k {
            "min" => w.min += v,
            "low" => w.low += v,
            "high" => w.high += v,
            "managed" => w.managed += v,
            _ => {}
        }
    }
    out
}

/// Read the topology under `sys` (normally `/sys`) and `/proc/zoneinfo` text.
pub fn read_topology_at(sys: &Path, zoneinfo: &str) -> Result<Topology, String> {
    let nodes_dir = sys.join("devices/system/node");
    let online = read_trim(nodes_dir.join("online"))
        .ok_or_else(|| format!("cannot read {}", nodes_dir.join("online").display()))?;
    let ids = parse_list(&online)?;
    let tiers = read_memory_tiers(&sys.join("devices/virtual/memory_tiering"));
    let wms = parse_zoneinfo(zoneinfo);
    let mut nodes = Vec::new();
    for id in ids {
        let d = nodes_dir.join(format!("node{id}"));
        let cpus =
            parse_list(&read_trim(d.join("cpulist")).unwrap_or_default()).unwrap_or_default();
        let (mem_total_kb, mem_free_kb) =
            parse_node_meminfo(&std::fs::read_to_string(d.join("meminfo")).unwrap_or_default());
        let distances = read_trim(d.join("distance"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let memory_tier = tiers
            .iter()
            .find(|(_, ns)| ns.contains(&id))
            .map(|(t, _)| *t);
        let hmat = read_hmat(&d.join("access0/initiators"));
        nodes.push(Node {
            id,
            cpus,
            mem_total_kb,
            mem_free_kb,
            distances,
            memory_tier,
            hmat,
            watermarks: wms.get(id as usize).copied().filter(|w| w.managed > 0),
        });
    }
    Ok(Topology { nodes })
}

/// Read the machine's topology.
pub fn read_topology() -> Result<Topology, String> {
    let zi = std::fs::read_to_string("/proc/zoneinfo").unwrap_or_default();
    read_topology_at(Path::new("/sys"), &zi)
}

/// `(tier id, nodes)` for every `memory_tierN` directory.
pub fn read_memory_tiers(dir: &Path) -> Vec<(u32, Vec<u32>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(n) = name
            .strip_prefix("memory_tier")
            .and_then(|n| n.parse().ok())
        {
            let nodes = parse_list(&read_trim(e.path().join("nodelist")).unwrap_or_default())
                .unwrap_or_default();
            out.push((n, nodes));
        }
    }
    out.sort();
    out
}

fn read_hmat(dir: &Path) -> Option<Hmat> {
    let f = |n: &str| read_trim(dir.join(n)).and_then(|s| s.parse().ok());
    let h = Hmat {
        read_latency_ns: f("read_latency")?,
        write_latency_ns: f("write_latency").unwrap_or(0),
        read_bandwidth_mbps: f("read_bandwidth").unwrap_or(0),
        write_bandwidth_mbps: f("write_bandwidth").unwrap_or(0),
    };
    Some(h)
}

/// Refresh `(MemTotal, MemFree)` KiB of one node.
pub fn node_meminfo(node: u32) -> (u64, u64) {
    parse_node_meminfo(
        &std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/meminfo"))
            .unwrap_or_default(),
    )
}

impl Topology {
    /// The node with `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The default fast node: a node with CPUs in the lowest memory tier (ties: the
    /// lowest id).
    pub fn default_fast(&self) -> Option<u32> {
        self.nodes
            .iter()
            .filter(|n| !n.cpus.is_empty() && n.mem_total_kb > 0)
            .min_by_key(|n| (n.memory_tier.unwrap_or(0), n.id))
            .map(|n| n.id)
    }

    /// The default slow node for `fast`: a CPU-less node in a lower (higher
    /// numbered) tier if any, else any other CPU-less node, else the farthest node.
    pub fn default_slow(&self, fast: u32) -> Option<u32> {
        let f = self.node(fast)?;
        let ft = f.memory_tier.unwrap_or(0);
        let others = || {
            self.nodes
                .iter()
                .filter(|n| n.id != fast && n.mem_total_kb > 0)
        };
        others()
            .filter(|n| n.cpus.is_empty() && n.memory_tier.unwrap_or(0) > ft)
            .min_by_key(|n| (n.memory_tier, n.id))
            .or_else(|| others().filter(|n| n.cpus.is_empty()).min_by_key(|n| n.id))
            .or_else(|| {
                others()
                    .max_by_key(|n| (f.distances.get(n.id as usize).copied().unwrap_or(0), n.id))
            })
            .map(|n| n.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_meminfo_fields() {
        let t = "Node 1 MemTotal:        2097152 kB\nNode 1 MemFree:         2012345 kB\nNode 1 MemUsed:           84807 kB\n";
        assert_eq!(parse_node_meminfo(t), (2097152, 2012345));
        assert_eq!(parse_node_meminfo(""), (0, 0));
    }

    #[test]
    fn zoneinfo_sums_zones_per_node() {
        let t = "Node 0, zone      DMA\n  pages free     3840\n        min      6\n        low      7\n        high     9\n        spanned  4095\n        managed  3840\n\
Node 0, zone    DMA32\n  pages free     400000\n        min      1000\n        low      1250\n        high     1500\n        managed  500000\n\
Node 1, zone   Normal\n  pages free     500000\n        min      900\n        low      1100\n        high     1300\n        managed  520000\n";
        let w = parse_zoneinfo(t);
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[0],
            NodeWatermarks {
                min: 1006,
                low: 1257,
                high: 1509,
                managed: 503840
            }
        );
        assert_eq!(w[1].low, 1100);
    }

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn two_node_fixture_tree_gives_cpu_less_slow_node() {
        let root = std::env::temp_dir().join(format!("tierkit-numa-{}", std::process::id()));
        let n = root.join("devices/system/node");
        write(&n.join("online"), "0-1\n");
        write(&n.join("node0/cpulist"), "0-1\n");
        write(
            &n.join("node0/meminfo"),
            "Node 0 MemTotal: 2000 kB\nNode 0 MemFree: 1000 kB\n",
        );
        write(&n.join("node0/distance"), "10 20\n");
        write(&n.join("node0/access0/initiators/read_latency"), "100\n");
        write(
            &n.join("node0/access0/initiators/read_bandwidth"),
            "20480\n",
        );
        write(&n.join("node1/cpulist"), "\n");
        write(
            &n.join("node1/meminfo"),
            "Node 1 MemTotal: 4000 kB\nNode 1 MemFree: 3900 kB\n",
        );
        write(&n.join("node1/distance"), "20 10\n");
        let t = root.join("devices/virtual/memory_tiering");
        write(&t.join("memory_tier4/nodelist"), "0\n");
        write(&t.join("memory_tier54/nodelist"), "1\n");
        let topo = read_topology_at(&root, "").unwrap();
        std::fs::remove_dir_all(&root).ok();
        assert_eq!(topo.nodes.len(), 2);
        assert_eq!(topo.nodes[0].cpus, vec![0, 1]);
        assert_eq!(topo.nodes[1].memory_tier, Some(54));
        assert_eq!(topo.nodes[0].hmat.unwrap().read_latency_ns, 100);
        assert!(topo.nodes[1].hmat.is_none());
        assert_eq!(topo.default_fast(), Some(0));
        assert_eq!(topo.default_slow(0), Some(1));
        assert_eq!(topo.nodes[1].distances, vec![20, 10]);
    }

    #[test]
    fn one_node_has_no_slow_node() {
        let topo = Topology {
            nodes: vec![Node {
                id: 0,
                cpus: vec![0],
                mem_total_kb: 100,
                mem_free_kb: 50,
                distances: vec![10],
                memory_tier: Some(4),
                hmat: None,
                watermarks: None,
            }],
        };
        assert_eq!(topo.default_fast(), Some(0));
        assert_eq!(topo.default_slow(0), None);
    }
}
