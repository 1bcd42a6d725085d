//! The Polaris tree generator checked against its closed forms.

use std::collections::HashSet;

use super::*;

/// Walks the tree from the root through `children` and checks it against the closed forms.
fn check_shape(width: u64, depth: u64) {
    let tree = Tree { width, depth };
    let mut seen = Vec::new();
    let mut frontier = vec![0];
    let mut levels = 0;
    while !frontier.is_empty() {
        assert_eq!(
            frontier,
            tree.level(levels).collect::<Vec<_>>(),
            "W={width} D={depth}: level {levels} is breadth-first numbered"
        );
        seen.extend(frontier.iter().copied());
        frontier = frontier.iter().flat_map(|n| tree.children(*n)).collect();
        levels += 1;
    }
    assert_eq!(levels, depth, "W={width} D={depth}: depth");
    let expected_nodes = if width == 1 {
        depth
    } else {
        (width.pow(depth as u32) - 1) / (width - 1)
    };
    assert_eq!(
        seen.len() as u64,
        expected_nodes,
        "W={width} D={depth}: nodes"
    );
    assert_eq!(tree.nodes(), expected_nodes);
    assert_eq!(seen, (0..expected_nodes).collect::<Vec<_>>());
    let leaves = tree.leaves();
    assert_eq!(leaves.end - leaves.start, width.pow(depth as u32 - 1));
    for leaf in leaves {
        assert!(tree.children(leaf).is_empty());
        assert_eq!(tree.path_to_root(leaf).len() as u64, depth);
    }
    for node in 1..expected_nodes {
        let path = tree.path_to_root(node);
        assert_eq!(path[0], 0);
        assert_eq!(*path.last().unwrap(), node);
        assert!(tree.children(path[path.len() - 2]).contains(&node));
    }
}

#[test]
fn tree_shapes_and_counts() {
    for (width, depth) in [
        (1, 1),
        (1, 5),
        (2, 1),
        (2, 4),
        (2, 13),
        (3, 5),
        (10, 3),
        (5, 2),
    ] {
        check_shape(width, depth);
    }
}

#[test]
fn polaris_published_sizes() {
    let sequential = Dataset {
        tree: Tree {
            width: 2,
            depth: 13,
        },
        tables_per_namespace: 2,
        views_per_namespace: 2,
        ..Dataset::default()
    };
    assert_eq!(sequential.namespaces(), 8_191);
    assert_eq!(sequential.tables(), 8_192);
    assert_eq!(sequential.views(), 8_192);
    let concurrent = Dataset {
        tree: Tree {
            width: 2,
            depth: 16,
        },
        ..sequential
    };
    assert_eq!(concurrent.namespaces(), 65_535);
    assert_eq!(concurrent.tables(), 65_536);
}

#[test]
fn defaults_are_polaris_defaults() {
    let d = Dataset::default();
    assert_eq!(d.namespaces(), 15);
    assert_eq!(d.leaf_count(), 8);
    assert_eq!(d.tables(), 40);
    assert_eq!(d.views(), 24);
    d.validate().unwrap();
}

#[test]
fn entity_names_and_placement() {
    let d = Dataset::default();
    assert_eq!(d.namespace(0), vec!["NS_0"]);
    assert_eq!(d.namespace(14), vec!["NS_0", "NS_2", "NS_6", "NS_14"]);
    // 8 leaves (7..15), 5 tables each.
    assert_eq!(d.table(0).namespace, 7);
    assert_eq!(d.table(4).namespace, 7);
    assert_eq!(d.table(5).namespace, 8);
    assert_eq!(d.table(39).namespace, 14);
    assert_eq!(d.table(39).name, "T_39");
    // 3 views per leaf, numbered with the tables' stride: V_5 is the first view of leaf 8.
    assert_eq!(d.view(3).name, "V_5");
    assert_eq!(d.view(3).namespace, 8);
    assert_eq!(d.view(3).table.as_deref(), Some("T_5"));
    let names: HashSet<String> = (0..d.views()).map(|i| d.view(i).name).collect();
    assert_eq!(names.len() as u64, d.views(), "view names are unique");
    for i in 0..d.tables() {
        assert!(d.tree.leaves().contains(&d.table(i).namespace));
    }
}

#[test]
fn caps_limit_tables_and_views() {
    let d = Dataset {
        max_tables: Some(7),
        max_views: Some(3),
        ..Dataset::default()
    };
    assert_eq!((d.tables(), d.views()), (7, 3));
    d.validate().unwrap();
    let too_many = Dataset {
        max_tables: Some(41),
        ..Dataset::default()
    };
    assert!(too_many.validate().is_err());
}
