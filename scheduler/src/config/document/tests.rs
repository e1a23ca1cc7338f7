use super::*;

#[test]
fn line_column_counts_characters_from_one() {
    let text = "ab\ncdé\nf";
    assert_eq!(line_column(text, 0), (1, 1));
    assert_eq!(line_column(text, 3), (2, 1));
    assert_eq!(line_column(text, text.find('f').unwrap()), (3, 1));
    assert_eq!(line_column(text, "ab\ncdé".len()), (2, 4));
}

#[test]
fn sniff_does_not_mistake_yaml_with_equals_for_toml() {
    assert_eq!(
        ConfigFormat::sniff("tasks: # a = b\n  - name: x\n"),
        ConfigFormat::Yaml
    );
    assert_eq!(ConfigFormat::sniff("---\ntasks: []\n"), ConfigFormat::Yaml);
    assert_eq!(
        ConfigFormat::sniff("\u{feff}\n\n{\"tasks\":[]}"),
        ConfigFormat::Json
    );
}

#[test]
fn content_type_suffixes_and_x_prefix() {
    assert_eq!(
        ConfigFormat::from_content_type("application/vnd.acme.tasks+json"),
        Some(ConfigFormat::Json)
    );
    assert_eq!(
        ConfigFormat::from_content_type("text/x-toml"),
        Some(ConfigFormat::Toml)
    );
    assert_eq!(ConfigFormat::from_content_type("image/json"), None);
    assert_eq!(ConfigFormat::from_content_type(""), None);
}
