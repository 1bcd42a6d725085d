//! The Apache Polaris benchmark's workloads over its tree dataset, with its parameters,
//! defaults, entity names, request bodies and request order, so figures compare with
//! the Gatling suite's.
//!
//! - `actions`: one request of the suite each, named as its report names them.
//! - `tree_workloads`: create-tree-dataset and read-tree-dataset.
//! - `read_update`: read-update-tree-dataset.
//! - `writes`: create-commits and the weighted (hot-spot) workload.

pub mod actions;
pub mod read_update;
pub mod tree_workloads;
pub mod writes;

use std::ops::Range;

/// A complete N-ary namespace tree; nodes are numbered breadth-first from the root 0, and
/// the children of `p` are `p·W+1 … p·W+W`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    pub width: u64,
    pub depth: u64,
}

impl Tree {
    /// Nodes at depth `d` (the root is depth 0).
    pub fn level(&self, d: u64) -> Range<u64> {
        if self.width == 1 {
            return d..d + 1;
        }
        let start = (self.width.pow(d as u32) - 1) / (self.width - 1);
        start..start + self.width.pow(d as u32)
    }

    pub fn nodes(&self) -> u64 {
        self.level(self.depth).start
    }

    pub fn leaves(&self) -> Range<u64> {
        self.level(self.depth - 1)
    }

    pub fn parent(&self, node: u64) -> Option<u64> {
        (node > 0).then(|| (node - 1) / self.width)
    }

    /// The ordinals from the root to `node`, both included.
    pub fn path_to_root(&self, node: u64) -> Vec<u64> {
        let mut path = vec![node];
        let mut at = node;
        while let Some(parent) = self.parent(at) {
            path.push(parent);
            at = parent;
        }
        path.reverse();
        path
    }

    pub fn children(&self, node: u64) -> Range<u64> {
        if self.path_to_root(node).len() as u64 >= self.depth {
            return 0..0;
        }
        let first = node * self.width + 1;
        first..first + self.width
    }
}

/// The dataset's parameters (Polaris's `dataset.tree` settings).
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Catalogs `C_0 … C_{n-1}` created through the management API; only `C_0` holds the tree.
    pub catalogs: u64,
    /// Where the tree lives: `C_0`, or an existing catalog's name (warehouse).
    pub catalog: String,
    pub base_location: String,
    /// The `storageConfigInfo` of created catalogs (JSON).
    pub storage_config: serde_json::Value,
    pub tree: Tree,
    pub tables_per_namespace: u64,
    pub max_tables: Option<u64>,
    pub views_per_namespace: u64,
    pub max_views: Option<u64>,
    pub columns_per_table: u64,
    pub columns_per_view: u64,
    pub namespace_properties: u64,
    pub table_properties: u64,
    pub view_properties: u64,
}

impl Default for Dataset {
    /// Polaris's defaults: 1 catalog, W=2, D=4, 5 tables and 3 views per leaf, 10
    /// columns, 10 properties.
    fn default() -> Dataset {
        Dataset {
            catalogs: 1,
            catalog: "C_0".into(),
            base_location: "file:///tmp/polaris".into(),
            storage_config: serde_json::json!({"storageType": "FILE"}),
            tree: Tree { width: 2, depth: 4 },
            tables_per_namespace: 5,
            max_tables: None,
            views_per_namespace: 3,
            max_views: None,
            columns_per_table: 10,
            columns_per_view: 10,
            namespace_properties: 10,
            table_properties: 10,
            view_properties: 10,
        }
    }
}

/// A table or view of the dataset: its namespace's ordinal and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    pub namespace: u64,
    pub name: String,
    /// For a view, the table its SQL selects from.
    pub table: Option<String>,
}

impl Dataset {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.tree.width >= 1, "namespace width must be at least 1");
        anyhow::ensure!(self.tree.depth >= 1, "namespace depth must be at least 1");
        anyhow::ensure!(
            (self.tree.depth as f64) * (self.tree.width as f64).log2() < 40.0,
            "a tree of width {} and depth {} is too large",
            self.tree.width,
            self.tree.depth
        );
        anyhow::ensure!(
            self.columns_per_table >= 1 && self.columns_per_view >= 1,
            "at least one column"
        );
        let leaves = self.leaf_count();
        if let Some(max) = self.max_tables {
            anyhow::ensure!(
                max <= leaves * self.tables_per_namespace,
                "max tables above the tree's"
            );
        }
        if let Some(max) = self.max_views {
            anyhow::ensure!(
                max <= leaves * self.views_per_namespace,
                "max views above the tree's"
            );
        }
        Ok(())
    }

    pub fn leaf_count(&self) -> u64 {
        let leaves = self.tree.leaves();
        leaves.end - leaves.start
    }

    pub fn namespaces(&self) -> u64 {
        self.tree.nodes()
    }

    pub fn tables(&self) -> u64 {
        self.max_tables
            .unwrap_or(self.leaf_count() * self.tables_per_namespace)
    }

    pub fn views(&self) -> u64 {
        self.max_views
            .unwrap_or(self.leaf_count() * self.views_per_namespace)
    }

    /// The namespace's identifier: `NS_<n>` for every node from the root to it.
    pub fn namespace(&self, node: u64) -> Vec<String> {
        self.tree
            .path_to_root(node)
            .into_iter()
            .map(|n| format!("NS_{n}"))
            .collect()
    }

    /// The `i`-th table: `T_i`, in leaf `i / tables-per-namespace`.
    pub fn table(&self, i: u64) -> Entity {
        let per = self.tables_per_namespace.max(1);
        Entity {
            namespace: self.tree.leaves().start + i / per,
            name: format!("T_{i}"),
            table: None,
        }
    }

    /// The `i`-th view. Like Polaris, its number strides by tables-per-namespace so that
    /// `V_n` selects from `T_n` in the same leaf.
    pub fn view(&self, i: u64) -> Entity {
        let per = self.views_per_namespace.max(1);
        let (position, j) = (i / per, i % per);
        let id = position * self.tables_per_namespace + j;
        Entity {
            namespace: self.tree.leaves().start + position,
            name: format!("V_{id}"),
            table: Some(format!("T_{id}")),
        }
    }
}

#[cfg(test)]
mod tests;
