use super::*;

#[test]
fn row_names_never_collide_with_tasks_shards_or_node_rows() {
    for (task, key) in [("a", "b"), ("sync.report", "tenant-42"), ("t", "x:y.z_1")] {
        let row = row_name(task, key);
        assert_eq!(split_row(&row), Some((task, key)));
        assert_eq!(crate::shard::split_row(&row), (task, 0), "its task's row");
        assert_eq!(crate::shard::row_node(&row), None);
        assert!(!crate::shard::is_task_row(&row));
    }
    for other in ["a", "a[2]", "a[@n]", "/b", "a/"] {
        assert_eq!(split_row(other), None, "{other}");
    }
}

#[test]
fn keys_are_short_and_hold_no_reserved_character() {
    for good in ["k", "tenant-42", "a.b:c_d", &"k".repeat(MAX_KEY_LEN)] {
        assert!(valid_key(good), "{good}");
    }
    for bad in [
        "",
        "a/b",
        "a[1]",
        "a]",
        "a@b",
        "a b",
        "é",
        &"k".repeat(MAX_KEY_LEN + 1),
    ] {
        assert!(!valid_key(bad), "{bad}");
    }
}
